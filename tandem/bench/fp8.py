"""`tandem bench fp8`: FP8 weights (engines/model/quantization.py, `engine.quantization: fp8`) against
bfloat16 on the same weights, in one run.

- **the shipped checkpoint**: the logits teacher-forced over the task suite's test prompts (the most
  likely next token's agreement, and the mean absolute difference over the bf16 logits' spread), the
  task scores per mode (lab.model.evaluate: exact match on the short families), and the weights' bytes;
- **the published 26B-A4B shapes** with random weights at reduced depth (`--layers`, 2 on a CPU):
  the same logit measures over random prompts, and the bytes.
Speed is not measured here: on a CPU fp8 is weight-only (each call dequantizes its weights); FP8
GEMMs run on GPUs of compute capability 8.9 and up (scripts/gpu/check.sh).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from typing import TYPE_CHECKING

from engines.defaults import SHIPPED_CHECKPOINT

if TYPE_CHECKING:  # the model code loads when a benchmark runs, not when the CLI builds its parser
    import torch

    from engines.replica.engine import DiffusionEngine

MB = 1 << 20


def logits(engine: DiffusionEngine, ids: list[int]) -> torch.Tensor:
    """Next-token logits (L, V) at every position of `ids`, teacher-forced."""
    import torch

    from engines.batch.sequence_batch import SequenceBatch

    with torch.inference_mode():
        return SequenceBatch(engine.model, 1, engine.model.device).encode(torch.tensor([ids], device=engine.model.device), logits="all")[0]


def logit_error(reference: list[torch.Tensor], other: list[torch.Tensor]) -> dict:
    """Top-1 agreement over every position, and |difference| / spread of the reference (mean, worst prompt)."""
    agree = sum(int((a.argmax(-1) == b.argmax(-1)).sum()) for a, b in zip(reference, other))
    positions = sum(a.shape[0] for a in reference)
    errors = [float((a - b).abs().mean() / a.std()) for a, b in zip(reference, other)]
    return {"top1_agreement": round(agree / positions, 4), "positions": positions,
            "mean_abs_error_over_std": round(statistics.fmean(errors), 4), "worst_prompt": round(max(errors), 4)}


def size(model) -> dict:
    from engines.model.quantization import weight_bytes

    b = weight_bytes(model)
    return {"float8_mb": round(b["float8"] / MB, 2), "other_mb": round(b["other"] / MB, 2), "total_mb": round((b["float8"] + b["other"]) / MB, 2)}


def shipped(checkpoint: str, n: int) -> dict:
    from engines.replica.engine import DiffusionEngine
    from engines.types import GenerationRequest
    from lab.model.evaluate import evaluate, short_mean
    from lab.model.tasks import TASK_FAMILIES, generate_suite

    engines = {how: DiffusionEngine.from_checkpoint(checkpoint, dtype="bfloat16", quantization=how) for how in ("none", "fp8")}
    items = generate_suite(max(n, 1), split="test", seed=0, families=TASK_FAMILIES)
    ids = [engines["none"].prompt_ids(GenerationRequest(messages=item.messages)) for item in items]
    out = {"logits": logit_error([logits(engines["none"], i) for i in ids], [logits(engines["fp8"], i) for i in ids]),
           "prompts": len(ids), "bytes": {how: size(e.model) for how, e in engines.items()}, "scores": {}}
    for how, engine in engines.items() if n else ():  # --n 0: no task scores (the GPU check's dry run)
        records = evaluate(engine, n, block_steps=(16,), log=lambda line: None).records
        labels = {(r["mode"], r["steps"], r["canvas"]) for r in records}
        out["scores"][how] = {" ".join(str(x) for x in label if x is not None): round(short_mean(
            [r for r in records if (r["mode"], r["steps"], r["canvas"]) == label]) or 0.0, 3) for label in sorted(labels, key=str)}
    return out


def shapes(shape: str, layers: int, prompts: int, length: int, device: str = "cpu", **text_overrides) -> dict:
    from engines.model.quantization import quantize_weights
    from tandem.bench.shape import prompts as random_prompts, shaped_engine

    engine = shaped_engine(shape, layers, "bfloat16", device, **text_overrides)
    ids = random_prompts(prompts, length, engine.vocab_size)
    reference = [logits(engine, i) for i in ids]
    before = size(engine.model)
    t0 = time.perf_counter()
    quantize_weights(engine.model, "fp8")
    return {"shape": shape, "layers": layers, "logits": logit_error(reference, [logits(engine, i) for i in ids]),
            "bytes": {"none": before, "fp8": size(engine.model)}, "quantize_s": round(time.perf_counter() - t0, 1)}


def main(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    result = {"checkpoint": args.checkpoint or str(SHIPPED_CHECKPOINT), "n_per_family": args.n}
    result["shipped"] = shipped(args.checkpoint or str(SHIPPED_CHECKPOINT), args.n)
    print(f"shipped checkpoint, bf16 -> fp8: logits {result['shipped']['logits']}; bytes {result['shipped']['bytes']}")
    for how, scores in result["shipped"]["scores"].items():
        print(f"  short families' exact match, {how}: {scores}")
    if args.layers:
        result["shapes"] = shapes(args.shape, args.layers, args.prompts, args.length, args.device, **args.text_overrides)
        s = result["shapes"]
        print(f"{s['shape']} shapes, {s['layers']} layers, random weights: logits {s['logits']}; bytes {s['bytes']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")
    return 0


def register(bench_commands) -> None:
    p = bench_commands.add_parser("fp8", help="FP8 weights against bf16: logit error, task scores, bytes (shipped model and 26B-A4B shapes)")
    p.add_argument("--checkpoint", default=None, help="checkpoint (default: the shipped model)")
    p.add_argument("--n", type=int, default=2, help="test items per task family for the task scores (0: none)")
    p.add_argument("--shape", default="26b-a4b")
    p.add_argument("--layers", type=int, default=2, help="layers of the random-weight shapes (0: skip them)")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--device", default="cpu", help="the shapes' device (cpu or cuda)")
    p.add_argument("--text-overrides", type=json.loads, default={}, help="the shapes' text-config fields to override, as JSON (tests)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", default=None)
    p.set_defaults(func=main)
