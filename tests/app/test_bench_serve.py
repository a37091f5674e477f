"""`tandem bench serve` against the running app: every policy, both concurrencies, rounds
summarized into medians and ratios."""

from __future__ import annotations

import json

import pytest

from tandem.bench.serve import oracle, per_request, score_against_ar, summarize
from tandem.main import main as tandem


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


def _items(policy, concurrency, round_, per_item):
    """A run with per-request figures: (ms, exact, score, text) per request."""
    items = [{"family": "code", "ms": ms, "mode": policy, "text": text, "exact": exact, "score": sc} for ms, exact, sc, text in per_item]
    rps = concurrency * len(items) / (sum(i["ms"] for i in items) / 1000)
    return _run(policy, concurrency, round_, rps, exact=sum(i["exact"] for i in items) / len(items)) | {"per_item": items}


def test_the_oracle_takes_per_request_the_fastest_mode_that_scores_as_ar():
    runs = [
        _items("all-ar", 1, 0, [(100, True, 1.0, "a"), (100, False, 0.5, "b"), (100, True, 1.0, "c")]),
        _items("all-block", 1, 0, [(20, False, 0.2, "x"), (30, False, 0.5, "b"), (50, True, 1.0, "c")]),  # worse on the first
        _items("all-verified", 1, 0, [(60, True, 1.0, "a"), (400, False, 0.5, "b"), (90, True, 1.0, "c")]),
        _items("router", 1, 0, [(60, True, 1.0, "a"), (45, False, 0.5, "b"), (160, True, 1.0, "c")]),
    ]
    (bound,) = oracle(runs)
    # block's 20 ms answer scores below AR's: the oracle takes verified's 60 ms there, block's elsewhere
    assert bound["oracle_requests_per_s"] == pytest.approx((3 / 0.1) * 100 / (60 + 30 + 50))
    assert bound["better_single_requests_per_s"] == pytest.approx(3 / 0.1)  # all-block
    assert bound["router_vs_oracle"] == pytest.approx((3 / 0.265) / ((3 / 0.1) * 100 / 140))
    assert bound["router_worst_vs_best_single"] == pytest.approx(160 / 50) and bound["router_over_1_5x_best_single"] == 2
    # against the oracle's mode per request (60, 30, 50 ms): the first is no longer 3x block's wrong 20 ms
    assert bound["router_worst_vs_oracle_mode"] == pytest.approx(160 / 50) and bound["router_over_1_5x_oracle_mode"] == 1


def test_each_requests_time_is_its_median_over_rounds():
    # request 0: the router is slow in one round only (a slow spell), at AR's time in the others;
    # request 1: block is fastest every round but answers worse, so the oracle mode is AR's
    def round_(k, router_ms):
        return [_items("all-ar", 1, k, [(100, True, 1.0, "a"), (200, True, 1.0, "b")]),
                _items("all-block", 1, k, [(150, True, 1.0, "a"), (50, False, 0.3, "x")]),
                _items("router", 1, k, [(router_ms, True, 1.0, "a"), (210, True, 1.0, "b")])]
    runs = round_(0, 100) + round_(1, 300) + round_(2, 110)
    assert max(b["router_worst_vs_oracle_mode"] for b in oracle(runs)) == pytest.approx(3.0)  # the slow round alone
    (q,) = per_request(runs)
    assert q["rounds"] == 3 and q["router_ms"] == [110, 210] and q["oracle_mode_ms"] == [100, 200] and q["best_single_ms"] == [100, 50]
    assert q["worst_vs_oracle_mode"] == pytest.approx(1.1) and q["over_1_5x_oracle_mode"] == 0
    assert q["worst_vs_best_single"] == pytest.approx(210 / 50) and q["over_1_5x_best_single"] == 1
    assert q["acceptable"] == 2  # both at AR's quality, within 1.25x of AR's time (1.1x and 1.05x)
    # a router answer that scores below AR's in most rounds is not acceptable, however fast
    worse = [r | {"per_item": [dict(i, exact=False, score=0.1) if r["policy"] == "router" and j == 1 else i for j, i in enumerate(r["per_item"])]}
             for r in runs]
    assert per_request(worse)[0]["acceptable"] == 1


def test_the_steady_oracle_keeps_each_requests_mode_over_the_rounds_and_the_better_single_mode_keeps_ars_quality():
    # Request 0: AR and verified take turns being faster by noise (100/90 ms, then 90/100): each
    # round's fastest sums 90 + 90, the steady oracle keeps one mode (its median is no better).
    # Request 1: block is 4x faster but answers worse every round: the oracle and the better
    # single mode at AR's quality both leave it out, the plain better single mode does not.
    def round_(k, ar0, verified0):
        return [_items("all-ar", 1, k, [(ar0, True, 1.0, "a"), (200, True, 1.0, "b")]),
                _items("all-block", 1, k, [(150, True, 1.0, "a"), (50, False, 0.3, "x")]),
                _items("all-verified", 1, k, [(verified0, True, 1.0, "a"), (200, True, 1.0, "b")]),
                _items("router", 1, k, [(100, True, 1.0, "a"), (200, True, 1.0, "b")])]
    runs = round_(0, 100, 90) + round_(1, 90, 100) + round_(2, 95, 95)
    bounds = oracle(runs)
    first = bounds[0]
    assert first["better_single"] == "all-block" and first["better_single_at_ar_quality"] == "all-verified"
    assert first["oracle_requests_per_s"] == pytest.approx(first["better_single_requests_per_s"] * 200 / (90 + 200))
    # steady modes: AR's median on request 0 is verified's (95 ms), block's 150; request 1: not block (answers worse)
    assert first["steady_oracle_modes"] == {"all-ar": 2}
    for b in bounds:  # the router at AR's time on both is the steady oracle's equal up to that noise
        assert b["router_vs_steady_oracle"] > b["router_vs_oracle"] - 1e-9
        assert b["router_vs_better_single_at_ar_quality"] == pytest.approx(b["router_requests_per_s"] / b["better_single_at_ar_quality_requests_per_s"])
    assert [b["router_vs_steady_oracle"] for b in bounds] == pytest.approx([1.0, 290 / 300, 295 / 300])
    assert [b["router_vs_oracle"] for b in bounds] == pytest.approx([290 / 300, 290 / 300, 295 / 300])


def test_realistic_answers_are_scored_against_all_ars_in_the_same_round():
    runs = [_items("all-ar", 1, 0, [(10, False, 0.0, "Paris."), (10, False, 0.0, "A long tale")]),
            _items("all-block", 1, 0, [(5, False, 0.0, "Paris."), (5, False, 0.0, "A long tail")])]
    score_against_ar(runs)
    ar, block = runs
    assert [i["exact"] for i in ar["per_item"]] == [True, True] and ar["exact_match"] == 1.0
    assert block["per_item"][0]["exact"] and not block["per_item"][1]["exact"] and 0.8 < block["per_item"][1]["score"] < 1.0
    assert block["exact_match"] == 0.5 and block["by_family"]["code"]["exact"] == 1


def test_bench_serve_realistic_workload_reports_the_oracle(base_url, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"id": f"p{i}", "kind": k, "messages": [{"role": "user", "content": t}]}) for i, (k, t) in
                                 enumerate([("free_text", "What is the capital of Peru?"), ("short_structured", "Label: I love it."),
                                            ("long_writing", "Write about the sea.")])))
    out = tmp_path / "serve.json"
    args = ["bench", "serve", "--url", base_url, "--workload", "realistic", "--prompts", str(prompts), "--max-tokens", "8",
            "--policies", "all-ar,all-verified,router", "--json", str(out)]
    assert tandem(args) == 0
    report = json.loads(out.read_text())
    assert report["workload"] == "realistic" and len(report["oracle"]) == 2  # concurrency 1 and 8
    verified = next(r for r in report["records"] if r["policy"] == "all-verified" and r["concurrency"] == 1)
    assert verified["exact_match"] == 1.0  # lossless: AR's own answers
    assert all(b["router_vs_oracle"] > 0 for b in report["oracle"])
    assert "router / oracle" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [(["--repeat", "0"], "at least 1"), (["--n", "zero"], "not an integer"),
                                           (["--policies", "all-ar,fastest"], "unknown policy fastest"), (["--policies", ","], "none given")])
def test_bad_arguments_are_refused_before_any_work(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        tandem(["bench", "serve", *args])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [(["--router-model", "/nonexistent/router.skops"], "no router model at /nonexistent"),
                                           (["--router-model", "router/decision/models/default.skops", "--url", "http://127.0.0.1:9"], "--url routes with its own")])
def test_a_router_model_the_app_could_not_load_is_refused_before_any_app_starts(args, message):
    with pytest.raises(SystemExit) as exc:
        tandem(["bench", "serve", *args])
    assert message in str(exc.value.code)
