"""`tandem doctor`: every check passes on a good setup (exit 0); a missing checkpoint, an
unreachable Redis or a taken port each fail with a fix (exit 1), and no password is printed."""

from __future__ import annotations

import socket

from tandem.main import main
from tests.policies.helpers import free_port


def run(capsys, *argv) -> tuple[int, str]:
    code = main(["doctor", *argv])
    return code, capsys.readouterr().out


def test_all_checks_pass_with_a_checkpoint_and_a_live_redis(capsys, tiny_checkpoint, redis_url):
    port = free_port()
    code, out = run(capsys, "--checkpoint", str(tiny_checkpoint), "--policy-source", redis_url, "--prefix", "tandem-doctor-test:",
                    "--port", str(port))
    assert code == 0, out
    for name in ("python", "torch", "transformers", "checkpoint", "router model", "policy source", "ray serve", "compile cache", f"port {port}"):
        assert f"ok    {name}" in out
    assert "has DiffusionGemmaForBlockDiffusion" in out and "9/9 checks passed" in out


def test_failures_say_what_to_fix(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TANDEM_CHECKPOINT", raising=False)
    dead_redis = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"  # nothing listens there
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        code, out = run(capsys, "--checkpoint", str(tmp_path / "missing"), "--policy-source", dead_redis,
                        "--port", str(taken.getsockname()[1]))
    assert code == 1
    assert "FAIL  checkpoint" in out and "does not exist" in out
    assert "FAIL  policy source" in out and "start Redis" in out
    assert "in use" in out
    assert out.count("fix:") == 4  # three check lines and the summary
    assert "hunter2-secret" not in out, "doctor printed the Redis password"


def test_a_broken_checkpoint_is_reported_not_raised(capsys, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    code, out = run(capsys, "--checkpoint", str(tmp_path))
    assert code == 1 and "does not load" in out


def test_the_compile_cache_is_reported_cold_then_warm(tmp_path, monkeypatch):
    from tandem.doctor import check_compile_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    cold = check_compile_cache()
    assert cold.ok and cold.detail.startswith("cold") and str(tmp_path) in cold.detail
    (tmp_path / "fxgraph" / "ab").mkdir(parents=True)
    (tmp_path / "fxgraph" / "ab" / "graph").write_text("compiled")
    warm = check_compile_cache()
    assert warm.ok and warm.detail.startswith("warm: 1 compiled graphs")
