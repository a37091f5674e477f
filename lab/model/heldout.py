"""The held-out score of a freshly trained checkpoint, per family, beside a baseline's (the shipped model).

What `scripts/gpu/train.sh` writes next to its checkpoint: the task suite's test split, `n` items
per short family and `n_long` per long family, decoded greedily in AR and in plain block mode (12
steps, right-sized canvas) by `lab.model.train.evaluate` on the training device. Per family and
mode the exact match and the family score (field exact for extract and the open-vocabulary
families; partial credit for the others). The open families (schema, toolcall, label) are not run
in plain block mode: served, their block answers are skeleton-seeded, and plain block never
produces a valid one (`tandem eval structured` measures the seeded path). The same items are
decoded by the baseline, and `beats_baseline` says per family whether the new checkpoint's AR
family score is at least the baseline's; `better_everywhere` is the shipping rule of issue 37.

    python -m lab.model.heldout --checkpoint DIR --baseline engines/checkpoints/tandem-tiny --json eval.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch


def score_checkpoint(path: str, items, device: torch.device, steps: int = 12) -> dict:
    """{"families": {family: {"ar_exact", "ar_score", "block_exact", "block_score"}}, "seconds"} for `path` on `items`."""
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from lab.model.tasks import OPEN_FAMILIES
    from lab.model.train import evaluate

    t0 = time.time()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(path, local_files_only=True).to(device)
    for item in items:
        item.output_tokens = None  # answer lengths are counted with this checkpoint's tokenizer
    raw = evaluate(model, tokenizer, items, modes=("ar", "block"), steps=steps, fields=True, block_skip=OPEN_FAMILIES)
    families: dict[str, dict] = {}
    for mode in ("ar", "block"):
        for family, v in raw.get(mode, {}).items():
            families.setdefault(family, {})[f"{mode}_exact"] = v
        for family, v in raw.get(f"{mode}_field", {}).items():
            families.setdefault(family, {})[f"{mode}_score"] = v
    n_params = sum(p.numel() for p in model.parameters())
    return {"checkpoint": str(path), "params_m": round(n_params / 1e6, 2), "families": families, "seconds": round(time.time() - t0, 1)}


def compare(new: dict, base: dict) -> dict[str, bool]:
    """Per family: the new checkpoint's AR family score is at least the baseline's."""
    return {f: s["ar_score"] >= base["families"].get(f, {}).get("ar_score", 0.0) for f, s in new["families"].items()}


def main(argv: list[str] | None = None) -> int:
    from lab.model.tasks import LONG_FAMILIES, SHORT_FAMILIES, generate_suite
    from lab.model.train import resolve_device

    p = argparse.ArgumentParser(prog="python -m lab.model.heldout", description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--baseline", default=None, help="checkpoint to score on the same items (default: none)")
    p.add_argument("--n", type=int, default=10, help="test items per short family")
    p.add_argument("--n-long", type=int, default=2, help="test items per long family (AR only)")
    p.add_argument("--families", default=None, help="comma-separated (default: all)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    wanted = args.families.split(",") if args.families else None
    short = tuple(f for f in SHORT_FAMILIES if wanted is None or f in wanted)
    long = tuple(f for f in LONG_FAMILIES if wanted is None or f in wanted)
    items = generate_suite(args.n, "test", 0, short) + (generate_suite(args.n_long, "test", 0, long) if args.n_long and long else [])
    report = {"split": "test", "n": args.n, "n_long": args.n_long, "device": str(device), "new": score_checkpoint(args.checkpoint, items, device)}
    if args.baseline:
        report["baseline"] = score_checkpoint(args.baseline, items, device)
        report["beats_baseline"] = compare(report["new"], report["baseline"])
        report["better_everywhere"] = all(report["beats_baseline"].values())
    Path(args.json).write_text(json.dumps(report, indent=1))
    print("| family | AR exact | AR score | block exact | block score |" + (" baseline AR score |" if args.baseline else ""))
    print("|---|---|---|---|---|" + ("---|" if args.baseline else ""))
    for family, s in report["new"]["families"].items():
        row = f"| {family} | {s.get('ar_exact', '-')} | {s.get('ar_score', '-')} | {s.get('block_exact', '-')} | {s.get('block_score', '-')} |"
        if args.baseline:
            row += f" {report['baseline']['families'].get(family, {}).get('ar_score', '-')} |"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
