"""`tandem bench layouts`: the split and the shared layout (router.decision.layouts) through HTTP, in one run.

Both apps run side by side in one Ray cluster (`/split` and `/shared` route prefixes; the one not
measured idles), and every round measures them in turn, so a slow spell of this shared machine
hits both alike. Two parts, on the task suite's test split (or the realistic prompts):
- **single mode**: all-block, all-verified and all-AR at concurrency 1 and 8 (`tandem.bench.serve._run`):
  requests/s, output tokens/s, p50/p99, exact match, per layout;
- **mixed load**: equal parts of the three modes at concurrency `--mixed-concurrency` (12), beside
  each mode alone at the same concurrency: each mode's p99 mixed over its p99 alone (the shared
  layout's target: <= 1.5x), and whether every request answered.
Prints tables and writes JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path

import httpx

LAYOUTS = ("split", "shared")
ADMIN_TOKEN = "bench-layouts-" + os.urandom(8).hex()
MODES = ("block", "verified", "ar")


CONFIGS = {"split": "serve_config.yaml", "shared": "serve_config.shared.yaml"}  # each layout's engine settings


def engine_settings(layout: str) -> dict:
    """The `engine:` block of the layout's shipped config (the repository root's serve_config*.yaml)."""
    import yaml

    path = Path(__file__).resolve().parents[2] / CONFIGS[layout]
    return yaml.safe_load(path.read_text())["applications"][0]["args"]["engine"]


def start_layouts(checkpoint: str | None, engines: dict[str, dict], num_cpus: int = 4) -> tuple[dict[str, str], callable]:
    """Both layouts' apps in one local Ray cluster, each under its own route prefix; returns
    ({layout: base url}, stop) once both answer /ready."""
    import ray
    from ray import serve

    from tandem.local_app import BUSY_MACHINE_SERVE_TIMEOUTS, HTTP_LIMITS, WORKER_PRIORITY, became_ready, free_port
    from router.app import application

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("TANDEM_ADMIN_TOKEN", ADMIN_TOKEN)  # the replicas read it at start: engine_memory() asks /admin/stats
    for name, value in (BUSY_MACHINE_SERVE_TIMEOUTS | WORKER_PRIORITY).items():
        os.environ.setdefault(name, value)
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)  # its own cluster
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port, **HTTP_LIMITS})
    urls = {}
    for layout in LAYOUTS:
        serve.run(application({"checkpoint": checkpoint, "layout": layout, "engine": engines[layout]}), name=f"tandem-{layout}",
                  route_prefix=f"/{layout}", blocking=False)
        urls[layout] = f"http://127.0.0.1:{port}/{layout}"

    def stop() -> None:
        serve.shutdown()
        ray.shutdown()

    deadline = time.monotonic() + 600
    for url in urls.values():
        if not became_ready(url, deadline):
            stop()
            raise SystemExit(f"tandem: {url} did not get ready in 600 s")
    return urls, stop


async def mixed(url: str, pairs: list[tuple[object, str]], concurrency: int, max_tokens: int) -> dict[str, list[float]]:
    """Send every (item, mode) at `concurrency`; returns {"ms": {mode: latencies}, "errors": {mode: n}, "requests_per_s"}."""
    sem = asyncio.Semaphore(concurrency)
    ms: dict[str, list[float]] = {m: [] for m in MODES}
    errors: dict[str, int] = {m: 0 for m in MODES}
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def one(item, mode: str) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await client.post("/v1/chat/completions", json={"model": f"tandem-{mode}", "messages": item.messages,
                                                                    "max_tokens": max_tokens})  # as tandem.bench.serve sends them
                if r.status_code != 200:
                    errors[mode] += 1
                    return
                ms[mode].append((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(item, mode) for item, mode in pairs))
    return {"ms": ms, "errors": errors, "requests_per_s": len(pairs) / (time.perf_counter() - t0)}


def engine_memory(url: str) -> dict[str, float | None]:
    """Resident memory (MiB) of each engine deployment's replica, from /admin/stats."""
    token = os.environ.get("TANDEM_ADMIN_TOKEN", ADMIN_TOKEN)
    try:
        engines = httpx.get(f"{url}/admin/stats", headers={"Authorization": f"Bearer {token}"}, timeout=10).json()["engines"]
    except (httpx.HTTPError, KeyError, ValueError):
        return {}
    return {e["deployment"]: e.get("rss_mb") for e in engines.values() if "deployment" in e}


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def main(args) -> int:
    from tandem.bench.serve import _run, realistic_items
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    items = realistic_items() if args.workload == "realistic" else generate_suite(args.n, split="test", seed=args.seed, families=TASK_FAMILIES)
    random.Random(args.seed).shuffle(items)
    engines = {layout: engine_settings(layout) for layout in LAYOUTS}
    print("engine settings: " + "; ".join(f"{layout} ({CONFIGS[layout]}) {e}" for layout, e in engines.items()), flush=True)
    urls, stop = start_layouts(args.checkpoint, engines)
    single, mixes = [], []
    try:
        for url in urls.values():
            asyncio.run(_run(url, "tandem-ar", items[:2], 1, args.max_tokens))  # warm-up
        for round_ in range(args.repeat):
            order = LAYOUTS if round_ % 2 == 0 else LAYOUTS[::-1]
            if not args.mixed_only:
                for concurrency in (1, 8):
                    for layout in order:
                        for mode in MODES:
                            rec = asyncio.run(_run(urls[layout], f"tandem-{mode}", items, concurrency, args.max_tokens))
                            single.append({"layout": layout, "mode": mode, "concurrency": concurrency, "round": round_}
                                          | {k: rec[k] for k in ("requests_per_s", "output_tokens_per_s", "p50_ms", "p99_ms", "exact_match", "errors")})
                            print(f"  round {round_ + 1} {layout:6s} {mode:8s} c={concurrency}: {rec['requests_per_s']:.2f} req/s, "
                                  f"p99 {rec['p99_ms']:.0f} ms", flush=True)
            c = args.mixed_concurrency
            for layout in order:
                alone = {m: asyncio.run(mixed(urls[layout], [(item, m) for item in items], c, args.max_tokens)) for m in MODES}
                pairs = [(item, m) for item in items for m in MODES]
                random.Random(args.seed + round_).shuffle(pairs)
                together = asyncio.run(mixed(urls[layout], pairs, c, args.max_tokens))
                rec = {"layout": layout, "round": round_, "concurrency": c,
                       "alone_p99_ms": {m: p99(alone[m]["ms"][m]) for m in MODES}, "mixed_p99_ms": {m: p99(together["ms"][m]) for m in MODES},
                       "alone_p50_ms": {m: statistics.median(alone[m]["ms"][m]) for m in MODES},
                       "mixed_p50_ms": {m: statistics.median(together["ms"][m]) for m in MODES},
                       "mixed_requests_per_s": together["requests_per_s"],
                       "errors": sum(together["errors"].values()) + sum(sum(a["errors"].values()) for a in alone.values())}
                mixes.append(rec)
                print(f"  round {round_ + 1} {layout:6s} mixed c={c}: " + ", ".join(
                    f"{m} p99 {rec['mixed_p99_ms'][m]:.0f} / alone {rec['alone_p99_ms'][m]:.0f} ms" for m in MODES), flush=True)
        memory = {layout: engine_memory(url) for layout, url in urls.items()}
    finally:
        stop()
    print_tables(single, mixes, args)
    print("\nengine replicas' resident memory: " + "; ".join(
        f"{layout}: " + ", ".join(f"{d} {mb} MiB" for d, mb in m.items()) + f" (sum {sum(mb or 0 for mb in m.values()):.0f} MiB)"
        for layout, m in memory.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"workload": args.workload, "n_per_family": args.n, "max_tokens": args.max_tokens,
                                               "repeat": args.repeat, "single": single, "mixed": mixes,
                                               "engine_rss_mb": memory}, indent=2))
        print(f"wrote {args.json}")
    return 0


def print_tables(single: list[dict], mixes: list[dict], args) -> None:
    med = statistics.median
    if single:
        print(f"\nsingle mode, {args.workload} workload, max_tokens {args.max_tokens}, median of {args.repeat} round(s)\n")
        print("| mode | concurrency | split req/s | shared req/s | shared / split | split p99 ms | shared p99 ms | errors |")
        print("|---|---|---|---|---|---|---|---|")
        for c in (1, 8):
            for mode in MODES:
                by = {lay: [r for r in single if r["layout"] == lay and r["mode"] == mode and r["concurrency"] == c] for lay in LAYOUTS}
                rps = {lay: med([r["requests_per_s"] for r in rs]) for lay, rs in by.items()}
                tail = {lay: med([r["p99_ms"] for r in rs]) for lay, rs in by.items()}
                errors = sum(r["errors"] for rs in by.values() for r in rs)
                print(f"| {mode} | {c} | {rps['split']:.2f} | {rps['shared']:.2f} | {rps['shared'] / rps['split']:.2f}x "
                      f"| {tail['split']:.0f} | {tail['shared']:.0f} | {errors} |")
    if mixes:
        c = mixes[0]["concurrency"]
        print(f"\nmixed load: equal parts of the three modes at concurrency {c} vs each mode alone at {c} (median of rounds)\n")
        print("| layout | mode | p50 alone ms | p50 mixed ms | p99 alone ms | p99 mixed ms | p99 mixed / alone | errors |")
        print("|---|---|---|---|---|---|---|---|")
        for layout in LAYOUTS:
            rs = [r for r in mixes if r["layout"] == layout]
            for mode in MODES:
                a, m = med([r["alone_p99_ms"][mode] for r in rs]), med([r["mixed_p99_ms"][mode] for r in rs])
                a50, m50 = med([r["alone_p50_ms"][mode] for r in rs]), med([r["mixed_p50_ms"][mode] for r in rs])
                print(f"| {layout} | {mode} | {a50:.0f} | {m50:.0f} | {a:.0f} | {m:.0f} | {m / a:.2f}x | {sum(r['errors'] for r in rs)} |")
        print("\nmixed load throughput: " + ", ".join(
            f"{layout} {med([r['mixed_requests_per_s'] for r in mixes if r['layout'] == layout]):.2f} req/s" for layout in LAYOUTS))


def register(bench_commands) -> None:
    from tandem.bench.serve import _positive

    p = bench_commands.add_parser("layouts", help="the split and the shared engine layout through HTTP, side by side in one run")
    p.add_argument("--checkpoint", default=None, help="checkpoint (default: the shipped model)")
    p.add_argument("--workload", choices=("suite", "realistic"), default="suite")
    p.add_argument("--n", type=_positive, default=2, help="test items per task family")
    p.add_argument("--max-tokens", type=int, default=128, help="max_tokens of every request")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=_positive, default=1, help="rounds (the tables show medians)")
    p.add_argument("--mixed-concurrency", type=_positive, default=12)
    p.add_argument("--mixed-only", action="store_true", help="skip the single-mode part")
    p.add_argument("--json", default=None)
    p.set_defaults(func=main)
