"""`tandem bench engines`: the library's `generate()` against Tandem's block, AR and verified modes.

Same weights, same prompts, one process, batch 1 and 8. Every request decodes exactly one
full canvas (`config.canvas_length` tokens, end-of-sequence ignored), so the modes do the
same work and the ratios compare decoding alone. The run also measures this machine's fp32
matrix-multiply peak and the share of it that block-mode decoder steps reach (FLOPs counted
with `torch.utils.flop_counter` on a real decoder step).
"""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from engines.batch.sequence_batch import SequenceBatch
from engines.batch.prefill import left_pad
from engines.defaults import SHIPPED_CHECKPOINT
from engines.replica.engine import DiffusionEngine
from engines.errors import InvalidRequestError
from engines.types import GenerationRequest

MODES = ("reference", "reference_ar", "block", "ar", "ar_no_lookup", "verified")


def load_engine(checkpoint: str | None) -> tuple[DiffusionEngine, str]:
    if checkpoint:
        return DiffusionEngine.from_checkpoint(checkpoint), checkpoint
    if (SHIPPED_CHECKPOINT / "config.json").is_file():
        return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT), str(SHIPPED_CHECKPOINT)
    from lab.model.tiny import save_tiny_checkpoint

    path = save_tiny_checkpoint(Path(tempfile.mkdtemp()) / "tiny", canvas_length=256, hidden_size=128)
    return DiffusionEngine.from_checkpoint(path), "tiny random model (hidden 128, 2 layers, canvas 256)"


def bench_prompts(n: int) -> list[list[dict]]:
    try:
        from lab.model.tasks import TASK_FAMILIES, generate_suite

        items = generate_suite(max(1, n // 7 + 1), split="test", seed=0, families=TASK_FAMILIES)
        return [item.messages for item in items][:n]
    except ImportError:
        from tests.engines.factories import PROMPTS

        return [[{"role": "user", "content": p}] for p in (PROMPTS * n)[:n]]


def matmul_peak_gflops(n: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@torch.inference_mode()
def decoder_step_flops(engine: DiffusionEngine, prompt_ids: list[list[int]], canvas: int) -> float:
    batch = SequenceBatch(engine.model, len(prompt_ids), engine.model.device)
    ids, valid = left_pad(prompt_ids, engine.pad_id, engine.model.device)
    batch.encode(ids, valid, logits="none")
    noise = torch.randint(0, engine.vocab_size, (len(prompt_ids), canvas))
    with FlopCounterMode(display=False) as counter:
        batch.denoise(noise, None)
    return float(counter.get_total_flops())


def run_reference(engine: DiffusionEngine, chunk: list[list[int]], steps: int, seed: int) -> tuple[int, int]:
    """transformers' generate() on a left-padded batch: (output tokens, forwards after prefill)."""
    ids, valid = left_pad(chunk, engine.pad_id, engine.model.device)
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = engine.model.generate(
            ids, attention_mask=valid, max_new_tokens=engine.config.canvas_length, max_denoising_steps=steps, eos_token_id=None
        )
    tokens = out.sequences.shape[1] - ids.shape[1]
    forwards = tokens / out.tokens_per_forward  # the library's count: denoising passes
    return tokens * len(chunk), int(forwards.sum())


def reference_ar_model(engine: DiffusionEngine):
    """transformers' own causal LM of the weights an imported checkpoint came from (Gemma 3 read from the same
    GGUF by transformers' GGUF loader): the AR reference. None for a checkpoint that was not imported."""
    from engines.model.gemma3_import import GGUF_SHA256, gguf_file

    if engine.facts.get("sha256") != GGUF_SHA256:
        return None
    from transformers import AutoModelForCausalLM

    path = gguf_file()
    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def run_reference_ar(engine: DiffusionEngine, reference, chunk: list[list[int]], max_new: int) -> tuple[int, int]:
    """transformers' greedy `generate()` of the reference model on a left-padded batch, `max_new` tokens per row
    (end-of-sequence suppressed, as the engine's runs here write through it): (output tokens, forwards)."""
    ids, valid = left_pad(chunk, engine.pad_id, engine.model.device)
    with torch.inference_mode():
        reference.generate(ids, attention_mask=valid, max_new_tokens=max_new, min_new_tokens=max_new, do_sample=False,
                           pad_token_id=engine.pad_id)
    return max_new * len(chunk), max_new - 1


def run_mode(engine: DiffusionEngine, mode: str, chunk: list[list[int]], steps: int, seed: int, acc: dict | None = None,
             max_new: int | None = None) -> tuple[int, int]:
    requests = [
        GenerationRequest(
            prompt=ids, mode=mode, seed=seed + i, max_new_tokens=max_new or engine.config.canvas_length, max_denoising_steps=steps,
            stop_token_ids=[], canvas=min(engine.config.canvas_length, max_new) if max_new else None,
        )
        for i, ids in enumerate(chunk)
    ]
    results = engine.generate_batch(requests)
    if acc is not None:
        acc["drafted"] = acc.get("drafted", 0) + sum(r.stats.drafted for r in results)
        acc["accepted"] = acc.get("accepted", 0) + sum(r.stats.accepted for r in results)
    return sum(r.stats.output_tokens for r in results), sum(r.stats.forwards - 1 for r in results)


def ar_step_ms(engine: DiffusionEngine, prompts: list[list[int]], steps: int, batch: int) -> float:
    """Wall milliseconds per AR step at `batch` with prompt lookup off: one token per call, as the
    cost profile prices AR (`CostProfile.forwards`). With lookup on, a call that checks a run of
    guesses costs more and writes several tokens; on this bench's answers, which loop, that made
    AR's calls look up to 5x dearer at batch 8 (measured 2026-12-06 on the shipped checkpoint)."""
    engine.lookup = False
    try:
        return measure(engine, ["ar"], prompts, batch, steps, 1)[0]["ms_per_forward"]
    finally:
        engine.lookup = True


def block_step_ms(engine: DiffusionEngine, prompts: list[list[int]], steps: int, canvas: int, batch: int) -> float:
    """Wall milliseconds per denoising step of block mode on `canvas`-token canvases at `batch`
    (prefill and sampler included), as the router's cost profile counts them."""
    requests = [
        GenerationRequest(prompt=ids, mode="block", seed=i, canvas=canvas, max_new_tokens=canvas, max_denoising_steps=steps, stop_token_ids=[])
        for i, ids in enumerate(prompts[:batch])
    ]
    t0 = time.perf_counter()
    results = engine.generate_batch(requests)
    elapsed = time.perf_counter() - t0
    return elapsed * 1000 / max(1, max(r.stats.forwards - 1 for r in results))


def canvas_costs_by_task(
    engine: DiffusionEngine, steps: int, n: int = 4, canvas_sizes: tuple[int, ...] = (64, 128, 256), skip_verified: tuple[str, ...] = ()
) -> tuple[dict[str, float], dict[str, float]]:
    """Per task family, on `n` of the task suite's test items each, on the smallest canvas that
    holds the answer: the mean denoising steps a block canvas takes (the model stops once its
    canvas is stable and confident: 2-3 steps on a one-line label, all of them on long free
    text), and the verified rounds (draft, verify, correct) a canvas's worth of answer takes:
    1.0 when the draft is right, more for each wrong token in it.
    Families in `skip_verified` (drafts almost never accepted: each token costs a whole draft)
    are not run verified."""
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    sizes = [c for c in canvas_sizes if c <= engine.config.canvas_length] or [engine.config.canvas_length]
    block_steps: dict[str, list[int]] = {}
    verified: dict[str, list[tuple[int, int]]] = {}  # family -> (rounds, canvases the answer spans) per item
    for i, item in enumerate(generate_suite(n, split="test", seed=1, families=TASK_FAMILIES)):
        tokens = item.count_tokens(engine.tokenizer) + 1
        canvas = next((c for c in sizes if c >= tokens), sizes[-1])
        req = GenerationRequest(messages=item.messages, mode="block", seed=i, canvas=canvas, max_new_tokens=canvas, max_denoising_steps=steps)
        block_steps.setdefault(item.family, []).extend(engine.generate(req).stats.steps_per_canvas)
        if item.family not in skip_verified:
            stats = engine.generate(dataclasses.replace(req, mode="verified")).stats
            verified.setdefault(item.family, []).append((len(stats.steps_per_canvas), max(1, -(-stats.output_tokens // canvas))))
    steps_by_task = {family: round(statistics.mean(counts), 2) for family, counts in block_steps.items()}
    rounds_per_canvas = {family: round(sum(r for r, _ in runs) / sum(c for _, c in runs), 2) for family, runs in verified.items()}
    return steps_by_task, rounds_per_canvas


def measure(engine, modes, prompts, batch, steps, repeats, max_new: int | None = None, reference=None) -> list[dict]:
    """Run every mode on every chunk of `batch` prompts, interleaved so that machine noise hits all
    modes alike. Returns one record per mode. `max_new`: tokens per answer (default: one canvas)."""
    acc = {m: {"latencies": [], "tokens": 0, "forwards": 0, "elapsed": 0.0} for m in modes}
    for rep in range(repeats):
        for start in range(0, len(prompts), batch):
            chunk, seed = prompts[start : start + batch], rep * 1000 + start
            for mode in modes:
                t0 = time.perf_counter()
                if mode == "reference":
                    tokens, forwards = run_reference(engine, chunk, steps, seed)
                elif mode == "reference_ar":
                    tokens, forwards = run_reference_ar(engine, reference, chunk, max_new or engine.config.canvas_length)
                elif mode == "ar_no_lookup":  # one token per call: prompt lookup's guesses off
                    engine.lookup = False
                    try:
                        tokens, forwards = run_mode(engine, "ar", chunk, steps, seed, acc[mode], max_new)
                    finally:
                        engine.lookup = True
                else:
                    tokens, forwards = run_mode(engine, mode, chunk, steps, seed, acc[mode], max_new)
                dt = time.perf_counter() - t0
                a = acc[mode]
                a["latencies"].append(dt)
                a["tokens"] += tokens
                a["forwards"] += forwards
                a["elapsed"] += dt
    return [
        {
            "mode": mode,
            "batch": batch,
            "tokens_per_s": a["tokens"] / a["elapsed"],
            "tokens_per_forward": a["tokens"] / max(1, a["forwards"]),
            "p50_ms": statistics.median(a["latencies"]) * 1000,
            # wall time per batched forward after prefill, sampler and prefill included
            "ms_per_forward": a["elapsed"] * 1000 / max(1, a["forwards"] / batch),
            "requests": len(prompts) * repeats,
            "output_tokens": a["tokens"],
            "acceptance": a["accepted"] / a["drafted"] if a.get("drafted") else None,
        }
        for mode, a in acc.items()
    ]


def acceptance_by_task(path: str) -> dict[str, float]:
    """Verified acceptance per task family from `tandem eval model --json` output."""
    try:
        records = json.loads(Path(path).read_text())
        found = {r["family"]: round(float(r["acceptance_rate"]), 4) for r in records if r["mode"] == "verified" and r.get("acceptance_rate") is not None}
        if not found:
            raise ValueError("no verified-mode records with an acceptance_rate")
        return found
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidRequestError(f"{path} is not `tandem eval model --json` output ({type(exc).__name__}: {exc})", param="acceptance_from") from None


def main(args) -> int:
    by_task = acceptance_by_task(args.acceptance_from) if args.acceptance_from else {}  # before minutes of measuring
    if args.write_profile and (args.batch_one or args.max_new_tokens):
        raise InvalidRequestError("--write-profile prices batches 1 and 8 on whole canvases: drop --batch-one and --max-new-tokens")
    if args.threads:
        torch.set_num_threads(args.threads)
    engine, source = load_engine(args.checkpoint)
    n_prompts = 8 if args.quick else 16
    repeats = 1 if args.quick else 2
    prompts = [engine.prompt_ids(GenerationRequest(messages=m)) for m in bench_prompts(n_prompts)]
    modes = [m for m in MODES if m in args.modes.split(",")]
    assert "ar" in modes, "ratios need the AR run"
    reference = reference_ar_model(engine) if "reference_ar" in modes else None
    if "reference_ar" in modes and reference is None:
        modes.remove("reference_ar")
        print("reference_ar: skipped (the checkpoint was not imported from a GGUF transformers can load)")
    max_new = args.max_new_tokens
    batches = (1,) if args.batch_one else (1, 8)
    print(f"checkpoint: {source}; canvas {engine.config.canvas_length}; {args.steps} steps; {n_prompts} prompts x {repeats}; "
          f"{max_new or engine.config.canvas_length} tokens per answer")
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}")

    for mode in modes:  # warm-up: first calls pay for allocations and lazy initialisation
        measure(engine, [mode], prompts[:2], 2, args.steps, 1, max_new=8 if max_new else None, reference=reference)
    peak = matmul_peak_gflops()
    records = []
    for batch in batches:
        records += measure(engine, modes, prompts, batch, args.steps, repeats, max_new=max_new, reference=reference)
        print(f"  measured batch {batch}", flush=True)
    for rec in records:
        same = {r["mode"]: r for r in records if r["batch"] == rec["batch"]}
        rec["ratio_vs_reference"] = rec["tokens_per_s"] / same["reference"]["tokens_per_s"] if "reference" in same else None
        rec["ratio_vs_reference_ar"] = rec["tokens_per_s"] / same["reference_ar"]["tokens_per_s"] if "reference_ar" in same else None
        rec["ratio_vs_ar"] = rec["tokens_per_s"] / same["ar"]["tokens_per_s"]

    utilization = []
    for batch in batches if "block" in modes else ():
        flops = decoder_step_flops(engine, prompts[:batch], engine.config.canvas_length)
        block = next(r for r in records if r["mode"] == "block" and r["batch"] == batch)
        step_s = block["ms_per_forward"] / 1000  # one canvas per request: every forward after prefill is a step
        utilization.append({"batch": batch, "decoder_step_gflop": flops / 1e9, "step_ms": step_s * 1000, "share_of_peak": flops / step_s / 1e9 / peak})

    print()
    ratio = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
    print("| mode | batch | tokens/s | tokens/forward | p50 ms | vs reference | vs reference_ar | vs AR |")
    print("|---|---|---|---|---|---|---|---|")
    for r in records:
        print(
            f"| {r['mode']} | {r['batch']} | {r['tokens_per_s']:.1f} | {r['tokens_per_forward']:.2f} | {r['p50_ms']:.0f} "
            f"| {ratio(r['ratio_vs_reference'])} | {ratio(r['ratio_vs_reference_ar'])} | {ratio(r['ratio_vs_ar'])} |"
        )
    print()
    print(f"fp32 matmul peak: {peak:.1f} GFLOP/s")
    for u in utilization:
        print(
            f"block decoder step, batch {u['batch']}: {u['decoder_step_gflop']:.3f} GFLOP in {u['step_ms']:.1f} ms "
            f"= {u['share_of_peak'] * 100:.1f}% of peak"
        )
    if args.write_profile:
        from engines.cost import CostProfile

        by = {(r["mode"], r["batch"]): r for r in records}
        verified = [r["acceptance"] for r in records if r["mode"] == "verified" and r["acceptance"] is not None]
        sizes = sorted({64, 128, engine.config.canvas_length} & set(range(1, engine.config.canvas_length + 1)))
        by_canvas = {c: {b: statistics.median(block_step_ms(engine, prompts, args.steps, c, b) for _ in range(3)) for b in (1, 8)} for c in sizes}
        print("block ms per step by canvas and batch: " + ", ".join(f"{c}: {v[1]:.1f} / {v[8]:.1f}" for c, v in by_canvas.items()))
        ar_ms = {b: ar_step_ms(engine, prompts, args.steps, b) for b in (1, 8)}
        print(f"AR ms per step, prompt lookup off (batch 1 / 8): {ar_ms[1]:.2f} / {ar_ms[8]:.2f}")
        # Verified rounds are measured where drafts are known to be accepted, or on short answers: on a
        # long answer whose drafts are almost never accepted each token costs a whole draft (minutes).
        from lab.model.tasks import LONG_FAMILIES

        hopeless = tuple(t for t, a in by_task.items() if a < 0.1) + tuple(t for t in LONG_FAMILIES if t not in by_task)
        steps_by_task, rounds_per_canvas = canvas_costs_by_task(engine, args.steps, skip_verified=hopeless)
        print("block steps per canvas by task: " + ", ".join(f"{t} {s:.1f}" for t, s in steps_by_task.items()))
        print("verified rounds per canvas by task: " + ", ".join(f"{t} {s:.2f}" for t, s in rounds_per_canvas.items()))
        verified = verified or list(by_task.values())
        profile = CostProfile(
            ms_per_forward={"block": {b: by[("block", b)]["ms_per_forward"] for b in (1, 8)}, "ar": ar_ms},
            canvas=engine.config.canvas_length,
            block_ms_by_canvas=by_canvas,
            acceptance=sum(verified) / len(verified) if verified else 0.5,
            acceptance_by_task=by_task,
            block_steps_by_task=steps_by_task,
            verified_rounds_per_canvas=rounds_per_canvas,
            steps=args.steps,
            machine=f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads",
        )
        print(f"wrote {profile.save(engine.path)}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"checkpoint": source, "steps": args.steps, "peak_gflops": peak, "decoder_utilization": utilization, "records": records},
                indent=2,
            )
        )
        print(f"wrote {args.json}")
    return 0
