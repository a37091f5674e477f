"""`tandem bench mixed`: one shared replica's scheduler in process (no HTTP), each mode alone and the
three together, on one copy of the weights: the shared layout's mixed-load target (each mode's p99
mixed within 1.5x of its p99 alone at the same concurrency) without the Gateway, on a checkpoint or
on a published checkpoint's shapes with random weights (what scripts/gpu/check.sh runs on a GPU).

Each round: every mode's requests alone at `--concurrency`, then all of them shuffled together at
the same concurrency; the scheduler's settings are the shared config's unless given (`--lane-threads`,
`--canvas-nice`). Prints each mode's p99 alone and mixed and their ratio per round; writes JSON.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from pathlib import Path

from typing import TYPE_CHECKING

from engines.defaults import SHIPPED_CHECKPOINT

if TYPE_CHECKING:  # the model code loads when the benchmark runs, not when the CLI builds its parser
    from engines.replica.engine import DiffusionEngine
    from engines.replica.scheduler import Scheduler

MODES = ("block", "verified", "ar")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


async def send(scheduler: Scheduler, pairs: list[tuple[dict, str]], concurrency: int) -> tuple[dict[str, list[float]], float]:
    """Every (request fields, mode) at `concurrency`: ({mode: latencies ms}, wall seconds)."""
    from engines.types import GenerationRequest

    gate, ms = asyncio.Semaphore(concurrency), {m: [] for m in MODES}

    async def one(fields: dict, mode: str) -> None:
        async with gate:
            t0 = time.perf_counter()
            await scheduler.submit(GenerationRequest(mode=mode, **fields))
            ms[mode].append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(f, m) for f, m in pairs))
    return ms, time.perf_counter() - t0


def workload(args) -> tuple[DiffusionEngine, list[dict]]:
    """The engine and each request's fields: the suite's test prompts, or random token ids at a shape."""
    if args.shape:
        from tandem.bench.shape import prompts, shaped_engine
        from engines.model.quantization import quantize_weights

        engine = shaped_engine(args.shape, args.layers, args.dtype, args.device, **args.text_overrides)
        quantize_weights(engine.model, args.quantization)
        return engine, [{"prompt": ids, "max_new_tokens": args.max_tokens, "stop_token_ids": []}
                        for ids in prompts(args.requests or args.n * 11, 64, engine.vocab_size)]
    from engines.replica.engine import DiffusionEngine
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    engine = DiffusionEngine.from_checkpoint(args.checkpoint or str(SHIPPED_CHECKPOINT), dtype=args.dtype, device=args.device,
                                             quantization=args.quantization)
    items = generate_suite(args.n, split="test", seed=0, families=TASK_FAMILIES)
    random.Random(0).shuffle(items)
    return engine, [{"messages": item.messages, "max_new_tokens": args.max_tokens} for item in items][:args.requests or None]


async def rounds(engine: DiffusionEngine, requests: list[dict], args) -> list[dict]:
    from engines.replica.scheduler import Scheduler, SchedulerConfig

    config = SchedulerConfig(max_batch_size=args.max_batch_size, max_queue=4 * len(requests) * len(MODES),
                             lane_threads=args.lane_threads, canvas_nice=args.canvas_nice)
    scheduler = Scheduler(engine, config)
    try:
        await send(scheduler, [(r, m) for r in requests[:2] for m in MODES], args.concurrency)  # warm-up
        out = []
        for round_ in range(args.repeat):
            alone = {m: (await send(scheduler, [(r, m) for r in requests], args.concurrency))[0][m] for m in MODES}
            pairs = [(r, m) for r in requests for m in MODES]
            random.Random(round_).shuffle(pairs)
            mixed, wall = await send(scheduler, pairs, args.concurrency)
            rec = {"round": round_, "alone_p99_ms": {m: round(p99(alone[m]), 1) for m in MODES},
                   "mixed_p99_ms": {m: round(p99(mixed[m]), 1) for m in MODES},
                   "mixed_p50_ms": {m: round(statistics.median(mixed[m]), 1) for m in MODES},
                   "mixed_requests_per_s": round(len(pairs) / wall, 2)}
            rec["ratio"] = {m: round(rec["mixed_p99_ms"][m] / rec["alone_p99_ms"][m], 2) for m in MODES}
            print(f"  round {round_ + 1}: p99 mixed / alone " + ", ".join(
                f"{m} {rec['ratio'][m]:.2f}x ({rec['mixed_p99_ms'][m]:.0f} / {rec['alone_p99_ms'][m]:.0f} ms)" for m in MODES)
                  + f"; {rec['mixed_requests_per_s']} req/s mixed", flush=True)
            out.append(rec)
        return out
    finally:
        scheduler.close(wait_s=60)  # workers still running at the interpreter's exit can abort it


def main(args) -> int:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    engine, requests = workload(args)
    print(f"tandem bench mixed: {len(requests)} requests per mode at concurrency {args.concurrency}, "
          f"lane_threads {args.lane_threads}, canvas_nice {args.canvas_nice}, {args.device}", flush=True)
    records = asyncio.run(rounds(engine, requests, args))
    median = {m: statistics.median(r["ratio"][m] for r in records) for m in MODES}
    print("median p99 mixed / alone: " + ", ".join(f"{m} {v:.2f}x" for m, v in median.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": {k: v for k, v in vars(args).items() if k != "func"},
                                               "rounds": records, "median_ratio": median}, indent=2))
        print(f"wrote {args.json}")
    return 0


def register(bench_commands) -> None:
    p = bench_commands.add_parser("mixed", help="a shared replica's scheduler in process: each mode alone and the three mixed")
    p.add_argument("--checkpoint", default=None, help="checkpoint (default: the shipped model)")
    p.add_argument("--shape", choices=["26b-a4b"], default=None, help="random weights of a published checkpoint's shapes instead")
    p.add_argument("--layers", type=int, default=None, help="with --shape: layers (default: all)")
    p.add_argument("--text-overrides", type=json.loads, default={}, help="with --shape: text-config fields to override, JSON (tests)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--quantization", choices=["none", "fp8"], default="none")
    p.add_argument("--n", type=int, default=4, help="suite items per family (with --shape: 11 x n random prompts)")
    p.add_argument("--requests", type=int, default=None, help="requests per mode (default: all of --n's)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=12)
    p.add_argument("--max-batch-size", type=int, default=8)
    p.add_argument("--lane-threads", type=int, default=2, help="the shared config's (1: both lanes on one thread, as on a GPU)")
    p.add_argument("--canvas-nice", type=int, default=10, help="the shared config's")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--json", default=None)
    p.set_defaults(func=main)
