"""`tandem bench serve`: the served app through HTTP, comparing routing policies on a workload.

Policies, selected per request by model alias so one running app serves all four: all-AR
(`tandem-ar`), all-block (`tandem-block`), all-verified (`tandem-verified`) and the learned
router (`tandem`). Workloads: `suite`, the task suite's test split (every family, mixed, in one
shuffled order shared by all policies), scored against its references; `realistic`, the
hand-written prompts of `tests/data/realistic_prompts.jsonl` (no template wrote them), scored
against all-AR's answer in the same round (exact: the same text). Concurrency 1 and 8. Reports
requests/s, output tokens/s, p50/p99 latency and quality (exact match, family score), with ratios
to all-AR and all-block, and the **oracle**: per request, the fastest single mode among those that
score as AR does on it, measured in the same round; its throughput (the better single mode's,
scaled by that mode's total time over the oracle's) is the router's upper bound, and the router is reported as a share of it, of
the better single mode, and per request against that request's best single mode (per round, and
as medians over the rounds). Beside them, the *steady* oracle (each request keeps one mode over
the rounds, the one with the lowest median time: a round's fastest also picks whichever mode a
slow spell spared) and the better single mode at AR's quality (within 1 point). Writes JSON and
a PNG. Without `--url` it starts the app in-process on a free port (the shipped checkpoint,
default policy) and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

import httpx

POLICIES = {"all-ar": "tandem-ar", "all-block": "tandem-block", "all-verified": "tandem-verified", "router": "tandem"}
SINGLE_MODES = ("all-ar", "all-block", "all-verified")
REALISTIC = Path(__file__).resolve().parents[2] / "tests" / "data" / "realistic_prompts.jsonl"


@dataclass
class Prompt:
    """A realistic workload item: no reference answer (it is scored against AR's)."""

    messages: list[dict]
    family: str  # its kind: short_structured, free_text, long_writing
    name: str


def realistic_items(path: Path = REALISTIC) -> list[Prompt]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [Prompt(r["messages"], r["kind"], r["id"]) for r in rows]


async def _run(url: str, model: str, items, concurrency: int, max_tokens: int) -> dict:
    from lab.model.tasks import score

    sem = asyncio.Semaphore(concurrency)
    latencies, outputs, modes, errors = [], [None] * len(items), [None] * len(items), 0
    reasons = [None] * len(items)  # the router's decision (rule: reason) per request
    item_ms = [0.0] * len(items)

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def one(i, item):
            nonlocal errors
            async with sem:
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json={"model": model, "messages": item.messages, "max_tokens": max_tokens})
                latencies.append(time.perf_counter() - t0)
                item_ms[i] = latencies[-1] * 1000
                if r.status_code != 200:
                    errors += 1
                    return
                body = r.json()
                outputs[i] = (body["choices"][0]["message"]["content"], body["usage"]["completion_tokens"])
                modes[i] = body["tandem"]["mode"]
                reasons[i] = f"{body['tandem']['rule']}: {body['tandem']['reason']}"

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
        elapsed = time.perf_counter() - t0
    scored = not isinstance(items[0], Prompt)  # realistic prompts are scored later, against AR's answers
    scores = [score(item, out[0]) if out is not None and scored else None for item, out in zip(items, outputs)]
    tokens = sum(out[1] for out in outputs if out is not None)
    latencies.sort()
    by_family: dict[str, dict] = {}
    for item, s, mode, ms in zip(items, scores, modes, item_ms):
        f = by_family.setdefault(item.family, {"n": 0, "exact": 0, "ms": 0.0, "modes": {}})
        f["n"] += 1
        f["ms"] += ms
        f["exact"] += bool(s and s.exact)
        if mode:
            f["modes"][mode] = f["modes"].get(mode, 0) + 1
    return {
        "requests": len(items),
        "errors": errors,
        "requests_per_s": len(items) / elapsed,
        "output_tokens_per_s": tokens / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
        "exact_match": sum(s.exact for s in scores if s) / len(items),
        "family_score": sum(s.family_score for s in scores if s) / len(items),
        "modes": {m: modes.count(m) for m in sorted(set(modes) - {None})},
        "by_family": by_family,
        "per_item": [{"family": item.family, "ms": ms, "mode": mode, "text": out[0] if out else None, "exact": bool(s and s.exact),
                      "score": s.family_score if s else 0.0, "decision": why}
                     for item, ms, mode, out, s, why in zip(items, item_ms, modes, outputs, scores, reasons)],
    }


def score_against_ar(runs: list[dict]) -> None:
    """Realistic workload: each run's answers scored against all-AR's in the same round and
    concurrency (exact: the same text; score: similarity), and its quality figures set from them."""
    for run in runs:
        ar = next(r for r in runs if r["policy"] == "all-ar" and r["round"] == run["round"] and r["concurrency"] == run["concurrency"])
        for mine, ref in zip(run["per_item"], ar["per_item"]):
            same = mine["text"] is not None and mine["text"] == ref["text"]
            mine["exact"] = same
            mine["score"] = 1.0 if same else SequenceMatcher(None, mine["text"] or "", ref["text"] or "").ratio()
        n = len(run["per_item"])
        run["exact_match"] = sum(i["exact"] for i in run["per_item"]) / n
        run["family_score"] = sum(i["score"] for i in run["per_item"]) / n
        for f in run["by_family"].values():
            f["exact"] = 0
        for mine in run["per_item"]:
            run["by_family"][mine["family"]]["exact"] += mine["exact"]


def scores_as_ar(item: dict, ar: dict) -> bool:
    """Whether a request's answer in some mode scores at least as AR's did (the oracle's criterion)."""
    return item["exact"] >= ar["exact"] and item["score"] >= ar["score"] - 1e-9


def steady_modes(runs: list[dict], concurrency: int) -> list[str] | None:
    """Each request's oracle mode over the rounds: among the single modes that score as AR does on
    it in most rounds, the one with the lowest median time. (Taking each round's fastest instead
    also picks whichever mode a slow spell spared in that round: a bound no router can reach.)"""
    by_round = [{r["policy"]: r for r in runs if (r["round"], r["concurrency"]) == (k, concurrency)}
                for k in sorted({r["round"] for r in runs if r["concurrency"] == concurrency})]
    by_round = [m for m in by_round if "all-ar" in m]
    if not by_round:
        return None
    modes = []
    for i in range(len(by_round[0]["all-ar"]["per_item"])):
        ok = [p for p in SINGLE_MODES if all(p in m for m in by_round)
              and 2 * sum(scores_as_ar(m[p]["per_item"][i], m["all-ar"]["per_item"][i]) for m in by_round) > len(by_round)]
        modes.append(min(ok or ["all-ar"], key=lambda p: statistics.median(m[p]["per_item"][i]["ms"] for m in by_round)))
    return modes


def at_ar_quality(run: dict, ar: dict) -> bool:
    """Whether a run's quality is within 1 point of all-AR's (exact match and family score)."""
    return run["exact_match"] >= ar["exact_match"] - 0.01 and run["family_score"] >= ar["family_score"] - 0.01


def oracle(runs: list[dict]) -> list[dict]:
    """Per round and concurrency: the per-request oracle (the fastest single mode among those that
    score at least as AR does on that request: that round's fastest, and each request's steady
    mode over the rounds, `steady_modes`) and the router against it, against the better single
    mode (the fastest, and the fastest at AR's quality), and per request against that request's
    fastest single mode."""
    out = []
    steady = {c: steady_modes(runs, c) for c in dict.fromkeys(r["concurrency"] for r in runs)}
    for key in dict.fromkeys((r["round"], r["concurrency"]) for r in runs):
        mine = {r["policy"]: r for r in runs if (r["round"], r["concurrency"]) == key}
        singles = [p for p in SINGLE_MODES if p in mine]
        if "all-ar" not in mine or len(singles) < 2:
            continue
        n, concurrency = len(mine["all-ar"]["per_item"]), key[1]
        best_ms, acceptable_ms = [], []
        for i in range(n):
            ar = mine["all-ar"]["per_item"][i]
            ok = [mine[p]["per_item"][i]["ms"] for p in singles if scores_as_ar(mine[p]["per_item"][i], ar)]
            acceptable_ms.append(min(ok))
            best_ms.append(min(mine[p]["per_item"][i]["ms"] for p in singles))
        # Throughput from times: scaled from the better single mode's measured throughput by its total
        # time over the oracle's (concurrency x requests / total time overstates a closed loop's tail).
        best = max(singles, key=lambda p: mine[p]["requests_per_s"])
        best_total = sum(i["ms"] for i in mine[best]["per_item"])
        rec = {"round": key[0], "concurrency": concurrency, "singles": singles, "better_single": best,
               "better_single_requests_per_s": mine[best]["requests_per_s"],
               "oracle_requests_per_s": mine[best]["requests_per_s"] * best_total / sum(acceptable_ms)}
        if steady[concurrency]:
            rec["steady_oracle_modes"] = {p: steady[concurrency].count(p) for p in singles if p in steady[concurrency]}
            steady_ms = sum(mine[p]["per_item"][i]["ms"] for i, p in enumerate(steady[concurrency]))
            rec["steady_oracle_requests_per_s"] = mine[best]["requests_per_s"] * best_total / steady_ms
        fair = max((p for p in singles if at_ar_quality(mine[p], mine["all-ar"])), key=lambda p: mine[p]["requests_per_s"])
        rec["better_single_at_ar_quality"] = fair
        rec["better_single_at_ar_quality_requests_per_s"] = mine[fair]["requests_per_s"]
        if "router" in mine:
            router = mine["router"]
            rec["router_requests_per_s"] = router["requests_per_s"]
            rec["router_vs_oracle"] = router["requests_per_s"] / rec["oracle_requests_per_s"]
            rec["router_vs_better_single"] = router["requests_per_s"] / rec["better_single_requests_per_s"]
            rec["router_vs_better_single_at_ar_quality"] = router["requests_per_s"] / rec["better_single_at_ar_quality_requests_per_s"]
            if "steady_oracle_requests_per_s" in rec:
                rec["router_vs_steady_oracle"] = router["requests_per_s"] / rec["steady_oracle_requests_per_s"]
            ratios = [router["per_item"][i]["ms"] / best_ms[i] for i in range(n)]
            rec["router_worst_vs_best_single"] = max(ratios)
            rec["router_over_1_5x_best_single"] = sum(x > 1.5 for x in ratios)
            # against each request's oracle mode: the fastest that scores as AR does (a faster mode
            # with a worse answer is no way to serve the request)
            vs_oracle = [router["per_item"][i]["ms"] / acceptable_ms[i] for i in range(n)]
            rec["router_worst_vs_oracle_mode"] = max(vs_oracle)
            rec["router_over_1_5x_oracle_mode"] = sum(x > 1.5 for x in vs_oracle)
            rec["router_exact_vs_ar"] = router["exact_match"] - mine["all-ar"]["exact_match"]
        out.append(rec)
    return out


ACCEPTABLE_SLOWDOWN = 1.25  # a routed request within this of its oracle mode's time, at AR's quality, was routed acceptably


def per_request(runs: list[dict]) -> list[dict]:
    """Per concurrency, each request's time as the median over rounds (one round's single request
    moves by +-50% on a busy 2-core machine; a worst case over rounds counts that noise, not the
    router): the router's median against the median of the request's fastest single mode, and of
    its oracle mode (the fastest that scores as AR does on it, in each round)."""
    out = []
    for concurrency in dict.fromkeys(r["concurrency"] for r in runs):
        rounds = sorted({r["round"] for r in runs if r["concurrency"] == concurrency})
        by_round = [{r["policy"]: r for r in runs if (r["round"], r["concurrency"]) == (k, concurrency)} for k in rounds]
        by_round = [m for m in by_round if "router" in m and "all-ar" in m]
        if not by_round:
            continue
        n = len(by_round[0]["router"]["per_item"])
        router_ms, best_ms, oracle_ms, as_good = [], [], [], []
        for i in range(n):
            mine, best, acceptable, good = [], [], [], []
            for m in by_round:
                singles = [p for p in SINGLE_MODES if p in m]
                ar = m["all-ar"]["per_item"][i]
                good.append(scores_as_ar(m["router"]["per_item"][i], ar))
                mine.append(m["router"]["per_item"][i]["ms"])
                best.append(min(m[p]["per_item"][i]["ms"] for p in singles))
                acceptable.append(min(m[p]["per_item"][i]["ms"] for p in singles if scores_as_ar(m[p]["per_item"][i], ar)))
            router_ms.append(statistics.median(mine))
            best_ms.append(statistics.median(best))
            oracle_ms.append(statistics.median(acceptable))
            as_good.append(2 * sum(good) > len(good))
        vs_best = [r / b for r, b in zip(router_ms, best_ms)]
        vs_oracle = [r / o for r, o in zip(router_ms, oracle_ms)]
        out.append({"concurrency": concurrency, "rounds": len(by_round), "requests": n,
                    "worst_vs_best_single": max(vs_best), "over_1_5x_best_single": sum(x > 1.5 for x in vs_best),
                    "worst_vs_oracle_mode": max(vs_oracle), "over_1_5x_oracle_mode": sum(x > 1.5 for x in vs_oracle),
                    # the router's choice was acceptable: an answer as good as AR's (most rounds), within
                    # ACCEPTABLE_SLOWDOWN of the fastest mode whose answer is
                    "acceptable": sum(g and r <= ACCEPTABLE_SLOWDOWN * o for g, r, o in zip(as_good, router_ms, oracle_ms)),
                    "router_ms": router_ms, "best_single_ms": best_ms, "oracle_mode_ms": oracle_ms})
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """One record per (policy, concurrency): medians over rounds of the speed figures, means of
    the quality figures, summed mode counts; ratios to all-AR and all-block from the medians, and
    each round's ratio to that round's better single mode (all-AR or all-block)."""
    keys = list(dict.fromkeys((r["policy"], r["concurrency"]) for r in runs))
    out = []
    for policy, concurrency in keys:
        mine = [r for r in runs if (r["policy"], r["concurrency"]) == (policy, concurrency)]
        rec = {"policy": policy, "concurrency": concurrency, "rounds": len(mine), "requests": mine[0]["requests"], "errors": sum(r["errors"] for r in mine)}
        for k in ("requests_per_s", "output_tokens_per_s", "p50_ms", "p99_ms"):
            rec[k] = statistics.median(r[k] for r in mine)
        for k in ("exact_match", "family_score"):
            rec[k] = statistics.mean(r[k] for r in mine)
        rec["modes"] = {}
        for r in mine:
            for m, n in r["modes"].items():
                rec["modes"][m] = rec["modes"].get(m, 0) + n
        rec["by_family"] = {f: {"exact": sum(r["by_family"][f]["exact"] for r in mine), "n": sum(r["by_family"][f]["n"] for r in mine),
                                "mean_ms": sum(r["by_family"][f]["ms"] for r in mine) / sum(r["by_family"][f]["n"] for r in mine)}
                            for f in mine[0]["by_family"]}
        rounds_best = []
        for r in mine:
            singles = [x["requests_per_s"] for x in runs if x["round"] == r["round"] and x["concurrency"] == concurrency and x["policy"] in SINGLE_MODES]
            rounds_best.append(r["requests_per_s"] / max(singles) if singles else float("nan"))
        rec["rounds_vs_best_single"] = rounds_best
        out.append(rec)
    for rec in out:
        same = {r["policy"]: r for r in out if r["concurrency"] == rec["concurrency"]}
        ar, block = same.get("all-ar"), same.get("all-block")
        rec["requests_vs_ar"] = rec["requests_per_s"] / ar["requests_per_s"] if ar else float("nan")
        rec["requests_vs_block"] = rec["requests_per_s"] / block["requests_per_s"] if block else float("nan")
        rec["tokens_vs_ar"] = rec["output_tokens_per_s"] / ar["output_tokens_per_s"] if ar else float("nan")
    return out


def main(args) -> int:
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    if args.workload == "realistic":
        if "all-ar" not in args.policies.split(","):
            raise SystemExit("tandem: the realistic workload is scored against all-AR's answers: include all-ar in --policies")
        items = realistic_items(Path(args.prompts) if args.prompts else REALISTIC)
    else:
        items = generate_suite(args.n, split="test", seed=args.seed, families=TASK_FAMILIES)
    random.Random(args.seed).shuffle(items)
    if args.router_model:  # refused here, not after the app has waited minutes for a Gateway that cannot start
        from router.decision.classifier import ModelError, load_model

        if args.url:
            raise SystemExit("tandem: --router-model is for the in-process app; a running app at --url routes with its own")
        try:
            load_model(args.router_model)
        except ModelError as exc:
            raise SystemExit(f"tandem: --router-model: {exc}") from None
    if args.url:
        url, stop = args.url, None
    else:
        from tandem.local_app import start_app

        app = start_app({"checkpoint": args.checkpoint, "router_model": args.router_model})
        url, stop = app.url, app.stop
    runs = []
    try:
        asyncio.run(_run(url, "tandem-ar", items[:2], 1, args.max_tokens))  # warm-up
        chosen = list({p: POLICIES[p] for p in args.policies.split(",")}.items())
        # Rounds interleave the policies, so a slow spell of this shared machine hits them alike, and
        # each round starts one policy later, so none always runs first (after the other concurrency).
        for round_ in range(args.repeat):
            for concurrency in (1, 8):
                turn = round_ % len(chosen)
                for policy, model in chosen[turn:] + chosen[:turn]:
                    rec = {"policy": policy, "concurrency": concurrency, "round": round_} | asyncio.run(_run(url, model, items, concurrency, args.max_tokens))
                    runs.append(rec)
                    print(f"  round {round_ + 1}/{args.repeat} {policy:12s} c={concurrency}: {rec['requests_per_s']:.2f} req/s, exact {rec['exact_match']:.3f}", flush=True)
    finally:
        if stop:
            stop()
    if args.workload == "realistic":
        score_against_ar(runs)
    records, bounds, requests = summarize(runs), oracle(runs), per_request(runs)
    what = f"{len(items)} realistic prompts (scored against all-AR)" if args.workload == "realistic" else f"{len(items)} task-suite test items ({args.n} per family)"
    print(f"\n{what}, max_tokens {args.max_tokens}, median of {args.repeat} round(s)\n")
    print("| policy | concurrency | req/s | output tok/s | p50 ms | p99 ms | exact match | family score | req/s vs all-AR | req/s vs all-block | per-round vs best single mode | modes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in records:
        per_round = ", ".join(f"{x:.2f}" for x in r["rounds_vs_best_single"])
        print(f"| {r['policy']} | {r['concurrency']} | {r['requests_per_s']:.2f} | {r['output_tokens_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} "
              f"| {r['exact_match']:.3f} | {r['family_score']:.3f} | {r['requests_vs_ar']:.2f}x | {r['requests_vs_block']:.2f}x | {per_round} | {r['modes']} |")
    if bounds:
        print_bounds(bounds)
    if requests:
        print("\nEach request's median time over the rounds, the router's against its fastest single mode's and its oracle mode's:\n")
        print("| concurrency | rounds | requests | worst / its best single mode | > 1.5x their best single mode | worst / its oracle mode "
              f"| > 1.5x their oracle mode | routed acceptably (AR's quality, <= {ACCEPTABLE_SLOWDOWN}x its oracle mode) |")
        print("|---|---|---|---|---|---|---|---|")
        for q in requests:
            print(f"| {q['concurrency']} | {q['rounds']} | {q['requests']} | {q['worst_vs_best_single']:.2f} | {q['over_1_5x_best_single']} "
                  f"| {q['worst_vs_oracle_mode']:.2f} | {q['over_1_5x_oracle_mode']} | {q['acceptable']} ({q['acceptable'] / q['requests']:.2f}) |")
    if args.json:
        Path(args.json).write_text(json.dumps({"workload": args.workload, "n_per_family": args.n, "max_tokens": args.max_tokens, "repeat": args.repeat,
                                               "records": records, "oracle": bounds, "per_request": requests, "runs": runs}, indent=2))
        print(f"wrote {args.json}")
    if args.plot:
        _plot(records, args.plot)
        print(f"wrote {args.plot}")
    return 0


def print_bounds(bounds: list[dict]) -> None:
    """The router against the oracles and the better single modes (medians over rounds), then per
    round's requests against their best single and oracle modes."""
    def med(mine, k):
        return statistics.median(b[k] for b in mine) if all(k in b for b in mine) else float("nan")

    def named(mine, k):
        names = [b[k] for b in mine]
        return max(set(names), key=names.count)

    print("\n| concurrency | oracle req/s (each round's fastest) | oracle req/s (steady modes) | better single | better single at AR's quality "
          "| router req/s | router / oracle | router / steady oracle | router / better single | router / better at AR's quality | router exact - all-AR |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for concurrency in (1, 8):
        mine = [b for b in bounds if b["concurrency"] == concurrency]
        if mine:
            print(f"| {concurrency} | {med(mine, 'oracle_requests_per_s'):.2f} | {med(mine, 'steady_oracle_requests_per_s'):.2f} "
                  f"| {named(mine, 'better_single')} {med(mine, 'better_single_requests_per_s'):.2f} "
                  f"| {named(mine, 'better_single_at_ar_quality')} {med(mine, 'better_single_at_ar_quality_requests_per_s'):.2f} "
                  f"| {med(mine, 'router_requests_per_s'):.2f} | {med(mine, 'router_vs_oracle'):.2f} | {med(mine, 'router_vs_steady_oracle'):.2f} "
                  f"| {med(mine, 'router_vs_better_single'):.2f} | {med(mine, 'router_vs_better_single_at_ar_quality'):.2f} | {med(mine, 'router_exact_vs_ar'):+.3f} |")
    print("\n| concurrency | router worst request / its best single mode | requests > 1.5x their best | worst / its oracle mode | > 1.5x their oracle mode |")
    print("|---|---|---|---|---|")
    for concurrency in (1, 8):
        mine = [b for b in bounds if b["concurrency"] == concurrency]
        if mine:
            print(f"| {concurrency} | {med(mine, 'router_worst_vs_best_single'):.2f} | {med(mine, 'router_over_1_5x_best_single'):.0f} "
                  f"| {med(mine, 'router_worst_vs_oracle_mode'):.2f} | {med(mine, 'router_over_1_5x_oracle_mode'):.0f} |")


def _plot(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for concurrency, marker in ((1, "o"), (8, "s")):
        rows = [r for r in records if r["concurrency"] == concurrency]
        ax[0].bar([f"{r['policy']}\nc={concurrency}" for r in rows], [r["requests_per_s"] for r in rows])
        for r in rows:
            ax[1].scatter(r["requests_per_s"], r["exact_match"], marker=marker, label=f"{r['policy']} c={concurrency}")
    ax[0].set_ylabel("requests / s")
    ax[0].tick_params(axis="x", labelsize=7)
    ax[1].set_xlabel("requests / s")
    ax[1].set_ylabel("exact match")
    ax[1].legend(fontsize=7)
    fig.suptitle("tandem bench serve: policies on the task suite's test split")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _policies(text: str) -> str:
    import argparse

    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policy {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICIES)}")
    return ",".join(names)


def register(bench_commands) -> None:
    p = bench_commands.add_parser("serve", help="all-AR / all-block / all-verified / router through HTTP on the task suite")
    p.add_argument("--url", default=None, help="a running app (default: start one in-process)")
    p.add_argument("--checkpoint", default=None, help="checkpoint for the in-process app (default: the shipped model)")
    p.add_argument("--router-model", default=None, help="router model (.skops) for the in-process app (default: the shipped router)")
    p.add_argument("--workload", choices=("suite", "realistic"), default="suite",
                   help="suite: the task suite's test split; realistic: tests/data/realistic_prompts.jsonl, scored against all-AR")
    p.add_argument("--prompts", default=None, help="with --workload realistic: another JSONL of {id, kind, messages}")
    p.add_argument("--n", type=_positive, default=6, help="test items per task family")
    p.add_argument("--max-tokens", type=int, default=768, help="max_tokens of every request")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=_positive, default=1, help="rounds over all policies; the table shows medians (noisy machines: 3-5)")
    p.add_argument("--policies", type=_policies, default=",".join(POLICIES), help=f"comma-separated subset of {', '.join(POLICIES)}")
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None, help="PNG of throughput and quality per policy")
    p.set_defaults(func=main)
