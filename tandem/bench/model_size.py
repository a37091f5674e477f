"""How large a model still serves on this CPU: AR and block tokens/s at batch 1 for model shapes.

The shipped checkpoint is the yardstick (issue 37: a new model may serve at most 2x slower in AR and
in block at batch 1). Every candidate is a random-weight model of a given shape with a given
tokenizer, and so is the yardstick ("shipped shape": the shipped config and tokenizer, random
weights): `tandem bench engines`'s measurement decodes exactly one full canvas per request with
end-of-sequence ignored, so AR's work does not depend on the weights, but block's does (a trained
model stops denoising a confident canvas early, a random one runs every step), and the cost per
model call (ms per forward) is what compares shapes. The trained shipped checkpoint is listed for
its real tokens/s. All models are measured in rounds, interleaved, so the load of a shared machine
hits them alike; each figure is the best round (the least disturbed by other processes). tok/s
is reported too, but on random weights it is no forecast: AR's prompt lookup and block's early
stop give a trained model several tokens per call.

    python -m tandem.bench.model_size --shapes 128x3,192x3,256x3 --tokenizer lab/model/runs/structured-h192
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from transformers import AutoTokenizer

from engines.defaults import SHIPPED_CHECKPOINT
from engines.replica.engine import DiffusionEngine
from engines.types import GenerationRequest
from tandem.bench.engines import bench_prompts, measure
from lab.model.train import TrainConfig, build_model


def parse_shape(text: str) -> dict:
    """'HIDDENxLAYERS' (heads of 48 below hidden 256, else of 64; half as many KV heads) or
    'HIDDENxLAYERSxHEADSxHEAD_DIMxKV'."""
    parts = [int(x) for x in text.lower().split("x")]
    if len(parts) == 2:
        hidden, layers = parts
        head_dim = 48 if hidden % 48 == 0 and hidden < 256 else 64 if hidden % 64 == 0 else 32
        heads = max(1, hidden // head_dim)
        return dict(hidden_size=hidden, num_layers=layers, num_heads=heads, head_dim=head_dim, kv_heads=max(1, heads // 2))
    hidden, layers, heads, head_dim, kv = parts
    return dict(hidden_size=hidden, num_layers=layers, num_heads=heads, head_dim=head_dim, kv_heads=kv)


def random_checkpoint(shape: dict, tokenizer_dir: str, root: Path) -> Path:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    model = build_model(tokenizer, TrainConfig(**shape))
    path = root / "x".join(str(v) for v in shape.values())
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tandem.bench.model_size", description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="128x3,192x3,256x3", help="comma-separated HIDDENxLAYERS[xHEADSxHEAD_DIMxKV]")
    p.add_argument("--tokenizer", default="lab/model/runs/structured-h192", help="tokenizer of the candidates (its vocabulary sets lm_head's size)")
    p.add_argument("--baseline", default=str(SHIPPED_CHECKPOINT), help="the yardstick checkpoint")
    p.add_argument("--prompts", type=int, default=4, help="prompts taken in turn, one per round (each decodes one full canvas)")
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=12, help="denoising steps per canvas")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="model-size-"))
    base_cfg = json.loads((Path(args.baseline) / "config.json").read_text())["text_config"]
    base_shape = dict(hidden_size=base_cfg["hidden_size"], num_layers=base_cfg["num_hidden_layers"], num_heads=base_cfg["num_attention_heads"],
                      head_dim=base_cfg["head_dim"], kv_heads=base_cfg["num_key_value_heads"])
    paths = {"shipped (trained)": args.baseline, "shipped shape": str(random_checkpoint(base_shape, args.baseline, root / "base"))}
    paths |= {s: str(random_checkpoint(parse_shape(s), args.tokenizer, root)) for s in args.shapes.split(",")}
    engines = {name: DiffusionEngine.from_checkpoint(path) for name, path in paths.items()}
    prompts = {name: [e.prompt_ids(GenerationRequest(messages=m)) for m in bench_prompts(args.prompts)] for name, e in engines.items()}
    for name, e in engines.items():  # warm-up: first calls pay for allocations and lazy initialisation
        measure(e, ["block", "ar"], prompts[name][:1], 1, args.steps, 1)
    # Many short rounds, one request per model and mode each: the best of them is the model's cost
    # with the least interference from whatever else this machine runs.
    runs: dict[str, dict[str, list[dict]]] = {name: {"block": [], "ar": []} for name in engines}
    for r in range(args.rounds):
        for name, e in engines.items():
            prompt = prompts[name][r % len(prompts[name])]
            for rec in measure(e, ["block", "ar"], [prompt], 1, args.steps, 1):
                runs[name][rec["mode"]].append(rec)
    best = {name: {m: min(recs, key=lambda r: r["ms_per_forward"]) for m, recs in by_mode.items()} for name, by_mode in runs.items()}
    base = best["shipped shape"]
    rows = []
    for name, e in engines.items():
        params = sum(p.numel() for p in e.model.parameters())  # the vision stub included (tiny)
        b = best[name]
        rows.append({"model": name, "params_m": round(params / 1e6, 2), "vocab": e.vocab_size,
                     **{f"{m}_tok_s": round(r["tokens_per_s"], 1) for m, r in b.items()},
                     **{f"{m}_tokens_per_call": round(r["tokens_per_forward"], 2) for m, r in b.items()},
                     **{f"{m}_ms_per_call": round(r["ms_per_forward"], 2) for m, r in b.items()},
                     **{f"{m}_cost": round(r["ms_per_forward"] / base[m]["ms_per_forward"], 2) for m, r in b.items()}})
    print(f"batch 1, one canvas of 256 per request, {args.steps} steps, best of {args.rounds} rounds, {args.threads} thread(s)")
    print("| model | params (M) | vocab | AR ms/call | block ms/step | AR cost vs shipped | block cost vs shipped | AR tok/s | block tok/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['params_m']} | {r['vocab']} | {r['ar_ms_per_call']} | {r['block_ms_per_call']} | {r['ar_cost']}x | "
              f"{r['block_cost']}x | {r['ar_tok_s']} | {r['block_tok_s']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
