"""`tandem bench serve` against the running app: every policy, both concurrencies, rounds
summarized into medians and ratios."""

from __future__ import annotations

import json

import pytest

from router.tools.bench_serve import summarize
from router.tools.cli import main as tandem


def _run(policy, concurrency, round_, rps, exact=0.5):
    return {"policy": policy, "concurrency": concurrency, "round": round_, "requests": 4, "errors": 0, "requests_per_s": rps,
            "output_tokens_per_s": 10 * rps, "p50_ms": 100.0, "p99_ms": 200.0, "exact_match": exact, "family_score": exact,
            "modes": {policy: 4}, "by_family": {"code": {"n": 4, "exact": int(4 * exact), "ms": 400.0, "modes": {}}}}


def test_rounds_become_medians_and_ratios_to_each_rounds_better_single_mode():
    runs = [_run("all-ar", 1, r, rps) for r, rps in enumerate((2.0, 4.0, 3.0))]
    runs += [_run("all-block", 1, r, rps) for r, rps in enumerate((5.0, 3.0, 6.0))]
    runs += [_run("router", 1, r, rps, exact=e) for r, (rps, e) in enumerate(((5.0, 0.5), (4.4, 0.75), (6.6, 1.0)))]
    records = {r["policy"]: r for r in summarize(runs)}
    router = records["router"]
    assert router["requests_per_s"] == 5.0 and router["rounds"] == 3 and router["exact_match"] == pytest.approx(0.75)
    assert router["requests_vs_ar"] == pytest.approx(5.0 / 3.0) and router["requests_vs_block"] == pytest.approx(1.0)
    assert router["rounds_vs_best_single"] == pytest.approx([1.0, 1.1, 1.1])  # each round against its own best single mode
    assert router["modes"] == {"router": 12} and router["by_family"]["code"] == {"exact": 9, "n": 12, "mean_ms": 100.0}


def test_bench_serve_runs_every_policy_through_http(base_url, tmp_path, capsys):
    out = tmp_path / "serve.json"
    args = ["bench", "serve", "--url", base_url, "--n", "1", "--max-tokens", "8", "--policies", "all-ar,all-block,router", "--repeat", "2", "--json", str(out)]
    assert tandem(args) == 0
    report = json.loads(out.read_text())
    assert len(report["runs"]) == 2 * 2 * 3 and report["repeat"] == 2
    records = report["records"]
    assert [(r["policy"], r["concurrency"]) for r in records] == [(p, c) for c in (1, 8) for p in ("all-ar", "all-block", "router")]
    for r in records:
        assert r["errors"] == 0 and r["requests"] == 7 and sum(r["modes"].values()) == 14 and r["requests_per_s"] > 0
    assert {r["policy"]: set(r["modes"]) for r in records if r["concurrency"] == 1}["all-block"] == {"block"}
    assert "req/s vs all-block" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [(["--repeat", "0"], "at least 1"), (["--n", "zero"], "not an integer"),
                                           (["--policies", "all-ar,fastest"], "unknown policy fastest"), (["--policies", ","], "none given")])
def test_bad_arguments_are_refused_before_any_work(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        tandem(["bench", "serve", *args])
    assert exc.value.code == 2 and message in capsys.readouterr().err
