"""`tandem policy ...` against a file store and a Redis store."""

from __future__ import annotations

import json

import yaml

from policies.stores import DEFAULT_POLICY_PATH, default_policy
from router.tools.cli import main


def test_validate_lists_every_invalid_field(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 0\ntask_modes: {extract: fast}\n")
    assert main(["policy", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "steps: " in err and "task_modes.extract: " in err and "'block', 'verified' or 'ar'" in err
    assert main(["policy", "validate", str(DEFAULT_POLICY_PATH)]) == 0


def test_apply_history_rollback_on_a_file(tmp_path, capsys):
    target = tmp_path / "live.yaml"
    target.write_text(DEFAULT_POLICY_PATH.read_text())
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**default_policy().content(), "steps": 20}))
    src = ["--source", str(target)]
    assert main(["policy", "apply", str(new), "--expect-version", "0", *src]) == 0
    assert main(["policy", "apply", str(new), "--expect-version", "0", *src]) == 2  # stale
    assert "current version is 1" in capsys.readouterr().err
    assert main(["policy", "rollback", "0", *src]) == 0
    assert main(["policy", "history", *src]) == 0
    out = capsys.readouterr().out
    assert "v0" in out and "v1" in out and "* v2" in out
    assert main(["policy", "show", "--json", *src]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["policy"]["version"] == 2 and shown["policy"]["steps"] == 12


def test_apply_and_show_on_redis(tmp_path, redis_url, prefix, capsys):
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump({**default_policy().content(), "confidence_floor": 0.7}))
    src = ["--source", redis_url, "--prefix", prefix]
    assert main(["policy", "apply", str(new), *src]) == 0
    assert "as version 1" in capsys.readouterr().out
    assert main(["policy", "show", "--json", *src]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["policy"]["version"] == 1 and shown["policy"]["confidence_floor"] == 0.7 and shown["status"]["healthy"]
    assert main(["policy", "rollback", "7", *src]) == 2
    assert "no policy version 7" in capsys.readouterr().err
