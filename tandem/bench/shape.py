"""`tandem bench engines --shape 26b-a4b`: every mode at a published checkpoint's shapes, random weights.

Nothing here can download DiffusionGemma-26B-A4B, so its shapes (lab/model/configs) are built with
random weights (lab/model/shapes.py), at reduced depth on a CPU (`--layers 2`) or in full on a GPU.
What it measures per mode and batch: output tokens per second, milliseconds per model call, and
peak memory of the step loop with the model included (resident memory on a CPU, the CUDA
allocator's peak on a GPU), beside one (batch, canvas, vocab) fp32 logits tensor, the unit the
memory bound is stated in. The library's `generate()` runs beside Tandem's modes on the same weights.

Random weights decide nothing about quality and make drafts wrong: block and the reference write
one canvas in a fixed number of steps (eos ignored), AR and verified write `tokens` tokens.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from engines.replica.engine import DiffusionEngine
from engines.model.generation import default_generation_config
from engines.model.loading import DTYPES, LoadedModel
from engines.model.quantization import quantize_weights
from lab.model.shapes import build_random_model, parameter_counts, shape_config
from tandem.bench.peak_memory import MB, peak_memory
from engines.types import GenerationRequest

MODES = ("reference", "block", "ar", "verified")
VLLM_ANCHOR_TOK_S = 1757  # vLLM's DiffusionGemma decode on one H100 (FP8, batch 1, 16 steps): docs/engines.md


def shaped_engine(shape: str, layers: int | None, dtype: str, device: str, **text_overrides) -> DiffusionEngine:
    """An engine on a random model of `shape` (text-config fields overridden for tests). Prompts are
    token ids, so any tokenizer serves: the tiny test tokenizer's ids are all below the vocabulary."""
    from lab.model.tiny import tiny_tokenizer

    config = shape_config(shape, layers, **text_overrides)
    model = build_random_model(config, DTYPES[dtype], device)
    model.generation_config = default_generation_config(config)
    tokenizer = tiny_tokenizer()
    tokenizer.padding_side = "left"
    return DiffusionEngine(LoadedModel(model, tokenizer, Path(tempfile.mkdtemp())), prefix_cache_tokens=0)


def prompts(batch: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [[2] + torch.randint(3, vocab, (length - 1,), generator=g).tolist() for _ in range(batch)]


def run(engine: DiffusionEngine, mode: str, chunk: list[list[int]], steps: int, tokens: int) -> tuple[int, int]:
    """Decode `chunk` in `mode`: (output tokens, model calls after the prefill)."""
    canvas = engine.config.canvas_length
    if mode == "reference":
        ids = torch.tensor(chunk, device=engine.model.device)
        torch.manual_seed(0)
        with torch.inference_mode():
            out = engine.model.generate(ids, max_new_tokens=canvas, max_denoising_steps=steps, eos_token_id=None)
        written = out.sequences.shape[1] - ids.shape[1]
        return written * len(chunk), int((written / out.tokens_per_forward).max())
    budget = canvas if mode == "block" else tokens
    requests = [GenerationRequest(prompt=ids, mode=mode, seed=i, max_new_tokens=budget, max_denoising_steps=steps,
                                  stop_token_ids=[]) for i, ids in enumerate(chunk)]
    results = engine.generate_batch(requests)
    return sum(r.stats.output_tokens for r in results), max(r.stats.forwards - 1 for r in results)


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def measure(engine: DiffusionEngine, modes: list[str], batches: list[int], steps: int, tokens: int, prompt_tokens: int,
            device: str, save=lambda records: None) -> list[dict]:
    """One record per mode and batch; `save` gets the records so far after each one, so a run cut
    short (a time limit, a crash in a later part) keeps what it measured. A mode that fails is
    recorded with its error and the run goes on."""
    text = engine.config.text_config
    records, failures = [], []
    for batch in batches:
        chunk = prompts(batch, prompt_tokens, text.vocab_size, seed=batch)
        logits_mb = batch * engine.config.canvas_length * text.vocab_size * 4 / MB
        for mode in modes:
            synchronize(device)
            try:
                with peak_memory(device) as peak:
                    t0 = time.perf_counter()
                    written, calls = run(engine, mode, chunk, steps, tokens)
                    synchronize(device)
                    elapsed = time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001 - a mode's failure is a result, not the end of the run
                print(f"  {mode:9s} batch {batch:2d}: FAILED {type(exc).__name__}: {exc}", flush=True)
                failures.append({"mode": mode, "batch": batch, "error": f"{type(exc).__name__}: {exc}"[:500]})
                save(records + failures)
                continue
            records.append({
                "mode": mode, "batch": batch, "tokens_per_s": written / elapsed, "output_tokens": written,
                "model_calls": calls, "ms_per_call": elapsed * 1000 / max(1, calls), "seconds": elapsed,
                "peak_mem_mb": peak.peak_mb, "before_mb": peak.before_mb, "logits_mb": logits_mb,
                "step_over_logits": peak.added_mb / logits_mb,  # the step loop's own peak, in logits tensors
            })
            r = records[-1]
            print(f"  {mode:9s} batch {batch:2d}: {r['tokens_per_s']:8.1f} tok/s, {r['ms_per_call']:8.1f} ms/call, "
                  f"peak {r['peak_mem_mb']:8.0f} MB (+{peak.added_mb:.0f} = {r['step_over_logits']:.2f}x one logits tensor)", flush=True)
            save(records + failures)
    for r in records:
        ref = next((x for x in records if x["mode"] == "reference" and x["batch"] == r["batch"]), None)
        r["ratio_vs_reference"] = r["tokens_per_s"] / ref["tokens_per_s"] if ref else None
    return records + failures  # a failed mode is a record with its error (and no measurements)


def matmul_peak_tflops(device: str, dtype: torch.dtype, n: int = 8192, repeats: int = 5) -> float:
    """The best of `repeats` (n x n) @ (n x n) products on `device`: the GPU's practical matmul peak."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


def block_step_flops(engine: DiffusionEngine, batch: int) -> float:
    """FLOPs of one block-mode decoder step at `batch` on a full canvas (torch's FLOP counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    from engines.batch.sequence_batch import SequenceBatch

    text, device = engine.config.text_config, engine.model.device
    # torch's FLOP counter asserts on SDPA with grouped-query shapes (fewer KV heads than query
    # heads: it crashed the first GPU run after every measurement was done); eager attention does
    # the same arithmetic as explicit matmuls, which it counts.
    attention = engine.model.config._attn_implementation
    engine.model.set_attn_implementation("eager")
    try:
        seq = SequenceBatch(engine.model, batch, device)
        with torch.inference_mode():
            seq.encode(torch.tensor(prompts(batch, 32, text.vocab_size), device=device), logits="none")
            noise = torch.randint(0, text.vocab_size, (batch, engine.config.canvas_length), device=device)
            with FlopCounterMode(display=False) as counter:
                seq.denoise(noise, None)
    finally:
        engine.model.set_attn_implementation(attention)
    return float(counter.get_total_flops())


def utilization(engine: DiffusionEngine, records: list[dict], dtype: torch.dtype, device: str) -> dict:
    """Block mode's share of the GPU's matmul peak per batch: one step's FLOPs over its time (a
    record's ms per model call, the commit pass counted as one of them)."""
    peak = matmul_peak_tflops(device, dtype)
    shares = {}
    for r in records:
        if r["mode"] == "block" and "error" not in r:
            tflop = block_step_flops(engine, r["batch"]) / 1e12
            shares[r["batch"]] = {"step_tflop": tflop, "share_of_peak": tflop / (r["ms_per_call"] / 1000) / peak}
    return {"matmul_peak_tflops": peak, "block": shares}


def main(args) -> int:
    device, dtype = args.device, args.dtype
    if args.threads:
        torch.set_num_threads(args.threads)
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        print("tandem bench engines: --device cuda but no CUDA device is visible", flush=True)
        return 2
    t0 = time.perf_counter()
    engine = shaped_engine(args.shape, args.layers, dtype, device, **getattr(args, "text_overrides", {}))  # overrides: tests
    quantize_weights(engine.model, getattr(args, "quantization", "none"))  # fp8: engines/model/quantization.py
    built_s = time.perf_counter() - t0
    model_mb = sum(p.numel() * p.element_size() for p in {id(p): p for p in engine.model.parameters()}.values()) / MB
    counts = parameter_counts(engine.model)
    text = engine.config.text_config
    machine = torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else (platform.processor() or platform.machine())
    print(f"shape {args.shape}: {text.num_hidden_layers} layers, vocabulary {text.vocab_size}, canvas {engine.config.canvas_length}, "
          f"{counts['total_b']:.2f} B parameters ({counts['active_b']:.2f} B active), {dtype} on {device} ({machine}), "
          f"{model_mb:.0f} MB, built in {built_s:.0f} s", flush=True)
    batches = [int(b) for b in args.batches.split(",")] if args.batches else [1, 8]
    modes = [m for m in MODES if m in args.modes.split(",")]
    steps = min(args.steps, 2) if args.quick else args.steps  # --quick: two denoising steps per canvas
    tokens = 16 if args.quick else engine.config.canvas_length
    def save(records: list[dict], gpu: dict | None = None) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({
                "shape": args.shape, "layers": text.num_hidden_layers, "dtype": dtype, "device": device, "machine": machine,
                "torch": torch.__version__, "threads": torch.get_num_threads(), "steps": steps, "model_mb": model_mb,
                "parameters_b": counts, "records": records, "gpu": gpu,
            }, indent=2))

    records = measure(engine, modes, batches, steps, tokens, prompt_tokens=32, device=device, save=save)
    try:
        gpu = utilization(engine, records, DTYPES[dtype], device) if torch.device(device).type == "cuda" else None
    except Exception as exc:  # noqa: BLE001 - the measurements above are kept whatever happens here
        gpu = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print()
    print("| mode | batch | tokens/s | ms per call | peak MB | step loop / one logits tensor | vs generate() |")
    print("|---|---|---|---|---|---|---|")
    for r in records:
        if "error" in r:
            print(f"| {r['mode']} | {r['batch']} | {r['error']} |")
            continue
        ratio = f"{r['ratio_vs_reference']:.2f}x" if r["ratio_vs_reference"] else "-"
        print(f"| {r['mode']} | {r['batch']} | {r['tokens_per_s']:.1f} | {r['ms_per_call']:.0f} | {r['peak_mem_mb']:.0f} "
              f"| {r['step_over_logits']:.2f}x | {ratio} |")
    if gpu and "error" not in gpu:
        print(f"\n{dtype} matmul peak: {gpu['matmul_peak_tflops']:.0f} TFLOP/s")
        for batch, u in gpu["block"].items():
            print(f"block step, batch {batch}: {u['step_tflop']:.2f} TFLOP = {u['share_of_peak'] * 100:.1f}% of peak")
        block1 = next((r for r in records if r["mode"] == "block" and r["batch"] == 1 and "error" not in r), None)
        if block1:
            print(f"block decode at batch 1: {block1['tokens_per_s']:.0f} tok/s = {block1['tokens_per_s'] / VLLM_ANCHOR_TOK_S:.2f}x "
                  f"vLLM's {VLLM_ANCHOR_TOK_S} tok/s (one H100, FP8, 16 steps)")
    save(records, gpu)
    if args.json:
        print(f"wrote {args.json}")
    return 0
