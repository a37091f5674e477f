"""`tandem bench engines --compile-compare`: eager and compiled model calls side by side, one process.

For each mode (block, AR, verified) and batch size, the same requests run on the eager model and
then on the same weights with their calls compiled (`engines.batch.compiled`), alternating over repeats
so that machine noise hits both alike. Per record:

- `tokens_per_s`: output tokens per second of wall time (after a warm-up that pays for compiling);
- `ops_per_call`: host-side operator dispatches per model call (every `aten::` event the profiler
  sees during one decode, divided by the batch's model calls: the sampler's work included);
- `syncs_per_canvas`: host reads of device data (`_local_scalar_dense`, which `item()` and truth
  tests end in, and `nonzero`) inside a canvas's steps, per canvas (block, verified), plus the
  stop-flag reads (`engines.decode.canvas_settings.StopFlags`, a `tolist()` the profiler does not see); for AR,
  every host read of the decode per token. Reported apart: `moe_reads_per_call`, the group offsets
  torch's CPU grouped-GEMM kernel reads for the mixture of experts (on CUDA it reads them on the
  device), and `other_reads_per_canvas`, reads outside the steps (masks built once per canvas,
  prefill, commit, handing tokens to the rows);
- `identical`: the compiled path wrote exactly the eager path's tokens (AR and verified greedy;
  block with the same seeds).

The shipped checkpoint by default; `--shape 26b-a4b --layers 2` measures the published model's
shapes at reduced depth, with a short canvas (a full one at vocabulary 262,144 takes seconds per
step on a CPU). Writes `{"records": [...]}` with `--json`.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from engines.model import experts
from engines.decode.canvas_settings import StopFlags
from engines.batch.compiled import compile_model, use_eager
from engines.replica.engine import DiffusionEngine
from engines.types import GenerationRequest, GenerationResult

MODES = ("block", "ar", "verified")
# A host read of device data ends in one of these (item() and truth tests go through _local_scalar_dense)
HOST_READS = frozenset({"aten::_local_scalar_dense", "aten::nonzero"})
CANVAS_LOOPS = ("denoise_canvas", "denoise_seeded")  # the functions whose loops are a canvas's steps


@dataclass(frozen=True)
class Workload:
    canvas: int  # block canvas (one per request)
    steps: int  # denoising steps per canvas
    tokens: int  # AR and verified answer length
    stop_check_every: int  # engines.decode.canvas_settings.StopFlags


def requests(mode: str, prompts: list[list[int]], w: Workload, seed: int) -> list[GenerationRequest]:
    """Requests that do the same work on every path: one whole block canvas, or `tokens` greedy tokens."""
    if mode == "block":
        return [GenerationRequest(prompt=p, mode="block", seed=seed + i, canvas=w.canvas, max_new_tokens=w.canvas,
                                  max_denoising_steps=w.steps, stop_token_ids=[]) for i, p in enumerate(prompts)]
    return [GenerationRequest(prompt=p, mode=mode, seed=seed + i, temperature=0.0, max_new_tokens=w.tokens,
                              max_denoising_steps=w.steps, stop_token_ids=[]) for i, p in enumerate(prompts)]


def decode(engine: DiffusionEngine, reqs: list[GenerationRequest]) -> tuple[list[GenerationResult], float]:
    start = time.perf_counter()
    results = engine.generate_batch(reqs)
    return results, time.perf_counter() - start


def where_read(event) -> str:
    """'moe', 'steps' or 'other': where a host read happened, from the profiler's op and Python frames
    above it (an op nested in another has no stack of its own)."""
    frames = []
    while event is not None:
        frames += [event.name, *(event.stack or ())]
        event = event.cpu_parent
    text = " ".join(frames)
    if "integrations/moe.py" in text:
        return "moe"
    if any(f"): {loop}" in text for loop in CANVAS_LOOPS) and "canvas_inputs" not in text:
        return "steps"
    return "other"


def counted(engine: DiffusionEngine, mode: str, reqs: list[GenerationRequest]) -> dict[str, float]:
    """Operator dispatches per model call and host reads by kind (see module doc) over one decode."""
    flags_before = StopFlags.reads_so_far
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        results = engine.generate_batch(reqs)
    flag_reads = StopFlags.reads_so_far - flags_before
    ops, reads = 0, {"steps": 0, "other": 0, "moe": 0}
    for event in prof.events():
        if event.name.startswith("aten::"):
            ops += 1
            if event.name in HOST_READS:
                reads[where_read(event)] += 1
    calls = max(r.stats.forwards for r in results)  # the batch's rows share their model calls
    canvases = max(1, max(len(r.stats.steps_per_canvas) for r in results))
    if mode == "ar":
        syncs = (reads["steps"] + reads["other"]) / max(1, max(r.stats.output_tokens for r in results))
    else:
        syncs = (reads["steps"] + flag_reads) / canvases
    return {"ops_per_call": ops / max(1, calls), "syncs_per_canvas": syncs,
            "other_reads_per_canvas": reads["other"] / canvases, "moe_reads_per_call": reads["moe"] / max(1, calls)}


def measure(engine: DiffusionEngine, prompts: list[list[int]], batches: tuple[int, ...], w: Workload,
            repeats: int, save=lambda records: None, modes: tuple[str, ...] = MODES) -> list[dict]:
    """Every mode and batch, eager and compiled on the same weights (`engines.batch.compiled` switches the
    model's calls), the two paths alternating over `repeats` timed runs after one warm-up each (the
    compiled warm-up pays for compiling). A part that fails is recorded with its error and the rest
    goes on; `save` gets the records so far after every part (a GPU run keeps what it measured if a
    later part crashes)."""
    engine.stop_check_every = w.stop_check_every
    cuda = engine.model.device.type == "cuda"
    runs: dict[tuple, dict] = {}

    def switch(compiled: bool) -> None:
        compile_model(engine.model, "on") if compiled else use_eager(engine.model)

    for mode in modes:
        for batch in batches:
            chunk = (prompts * batch)[:batch]
            reqs = requests(mode, chunk, w, seed=0)
            acc = {c: {"tokens": 0, "calls": 0, "elapsed": 0.0, "peak": 0.0} for c in (False, True)}
            try:
                for compiled in (False, True):
                    switch(compiled)
                    t0 = time.perf_counter()
                    decode(engine, reqs)  # warm-up: compiles on the compiled path
                    acc[compiled]["warm_s"] = time.perf_counter() - t0
                for rep in range(repeats):
                    for compiled in ((False, True) if rep % 2 == 0 else (True, False)):
                        switch(compiled)
                        if cuda:
                            torch.cuda.reset_peak_memory_stats()
                        results, dt = decode(engine, reqs)
                        a = acc[compiled]
                        a["tokens"] += sum(r.stats.output_tokens for r in results)
                        a["calls"] += max(r.stats.forwards for r in results)
                        a["elapsed"] += dt
                        a["outputs"] = [r.token_ids for r in results]
                        if cuda:
                            a["peak"] = max(a["peak"], torch.cuda.max_memory_allocated() / 2**20)
                for compiled in (False, True):
                    switch(compiled)
                    a = acc[compiled]
                    runs[(mode, batch, compiled)] = {
                        "mode": mode, "batch": batch, "compiled": compiled, "tokens_per_s": a["tokens"] / a["elapsed"],
                        "ms_per_call": a["elapsed"] * 1000 / max(1, a["calls"]), **counted(engine, mode, reqs),
                        "peak_mem_mb": a["peak"] if cuda else None, "warmup_s": a["warm_s"], "outputs": a["outputs"],
                    }
                print(f"  {mode} batch {batch}: eager {runs[(mode, batch, False)]['tokens_per_s']:.1f} tok/s, compiled "
                      f"{runs[(mode, batch, True)]['tokens_per_s']:.1f} (compile warm-up {acc[True]['warm_s']:.1f} s)", flush=True)
            except Exception as exc:  # noqa: BLE001 - a part's failure is a result, not the end of the run
                error = f"{type(exc).__name__}: {exc}"[:500]
                for compiled in (False, True):
                    runs.setdefault((mode, batch, compiled), {"mode": mode, "batch": batch, "compiled": compiled, "error": error})
                print(f"  {mode} batch {batch}: FAILED {error}", flush=True)
            save(finish(runs))
    use_eager(engine.model)
    return finish(runs)


def finish(runs: dict[tuple, dict]) -> list[dict]:
    """Records with the comparison to the eager run of the same mode and batch (where both ran)."""
    records = []
    for (mode, batch, compiled), r in runs.items():
        eager = runs.get((mode, batch, False), {})
        rec = {k: v for k, v in r.items() if k != "outputs"}
        if "error" not in r and "error" not in eager and eager:
            rec |= {"identical": r["outputs"] == eager["outputs"], "speedup_vs_eager": r["tokens_per_s"] / eager["tokens_per_s"],
                    "ops_vs_eager": r["ops_per_call"] / eager["ops_per_call"]}
        records.append(rec)
    return records


def print_table(records: list[dict]) -> None:
    print()
    print("| mode | batch | path | tokens/s | vs eager | ops per call | vs eager | syncs per canvas (AR: token) | identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in records:
        if "identical" not in r:
            print(f"| {r['mode']} | {r['batch']} | {'compiled' if r['compiled'] else 'eager'} | {r.get('error', 'no eager run to compare')} |")
            continue
        print(f"| {r['mode']} | {r['batch']} | {'compiled' if r['compiled'] else 'eager'} | {r['tokens_per_s']:.1f} "
              f"| {r['speedup_vs_eager']:.2f}x | {r['ops_per_call']:.0f} | {r['ops_vs_eager']:.2f} | {r['syncs_per_canvas']:.1f} "
              f"| {r['identical']} |")


def main(args) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(args, "dense_experts_max_rows", None) is not None:
        experts.DENSE_MAX_ROWS = args.dense_experts_max_rows
    device = getattr(args, "device", "cpu") or "cpu"
    if args.shape:
        from tandem.bench.shape import prompts as random_prompts, shaped_engine

        layers = args.layers or 2
        dtype = args.dtype if device != "cpu" else "float32"  # bf16 is 4-20x slower than fp32 on this CPU
        engine = shaped_engine(args.shape, layers, dtype, device, **(getattr(args, "text_overrides", None) or {}))
        source = f"{args.shape}, {layers} layers, random {dtype} weights, {device}"
        prompts = random_prompts(1, 32, engine.vocab_size)
        if device == "cpu":  # a full canvas at vocabulary 262,144 takes seconds per step here
            workload = Workload(canvas=16, steps=4, tokens=8, stop_check_every=args.stop_check_every or 4)
            batches = tuple(int(b) for b in args.batches.split(",")) if args.batches else (1,)
        else:
            workload = Workload(canvas=256, steps=args.steps, tokens=64, stop_check_every=args.stop_check_every or 4)
            batches = tuple(int(b) for b in args.batches.split(",")) if args.batches else (1, 8, 16)
    else:
        from tandem.bench.engines import bench_prompts, load_engine

        engine, source = load_engine(args.checkpoint)
        prompts = [engine.prompt_ids(GenerationRequest(messages=m)) for m in bench_prompts(4)]
        workload = Workload(canvas=min(64, engine.config.canvas_length), steps=args.steps, tokens=32 if args.quick else 64,
                            stop_check_every=args.stop_check_every or 1)
        batches = (1, 8)
    repeats = 2 if args.quick else 4
    print(f"model: {source}; canvas {workload.canvas}, {workload.steps} steps, {workload.tokens} AR tokens, "
          f"stop flags read every {workload.stop_check_every} steps, {repeats} repeats")
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    print(f"machine: {machine}")

    def save(records: list[dict]) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({"model": source, "machine": machine, "workload": workload.__dict__,
                                                   "dense_experts_max_rows": experts.DENSE_MAX_ROWS, "records": records},
                                                  indent=2))

    modes = tuple(m for m in MODES if m in (getattr(args, "modes", None) or ",".join(MODES)).split(","))
    records = measure(engine, prompts, batches, workload, repeats, save, modes)
    print_table(records)
    if args.json:
        print(f"wrote {args.json}")
    return 0
