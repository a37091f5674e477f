"""Engine-side subcommands of `tandem`: train, eval model, bench engines, demo, serve.
Each imports its module only when run."""

from __future__ import annotations

import argparse
import json
import sys


def _json_object(text: str) -> dict:
    """An argparse type: a JSON object (text-config fields), or a usage error that says what was wrong."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg} at character {exc.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object of text-config fields is wanted, got {type(value).__name__}")
    return value


def _bounded(kind, low: float, high: float = float("inf"), low_open: bool = False):
    """An argparse type: `kind` within [low, high] ((low, high] with low_open), or a clear usage error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < low or (low_open and value == low) or value > high:
            left = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"must be in {left}{low:g}, {high:g}], got {text}")
        return value

    return parse


def _batch_sizes(text: str) -> str:
    """An argparse type: comma-separated positive batch sizes ("1,4,8"), kept as the text."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return text


def _existing_file(text: str) -> str:
    from pathlib import Path

    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return text


def _lazy(module: str, func: str = "main"):
    def run(args: argparse.Namespace) -> int:
        mod = __import__(module, fromlist=[func])
        return getattr(mod, func)(args)

    return run


def _lazy_shape_or(module: str):
    """`tandem bench engines`: the checkpoint benchmark, or with --shape the random-weight one."""
    def run(args):
        if args.shape and args.text_overrides:  # checked before minutes of building: a misspelt field is a usage error
            from lab.model.shapes import shape_config

            try:
                shape_config(args.shape, 1, **args.text_overrides)
            except ValueError as exc:
                print(f"tandem bench engines: error: argument --text-overrides: {exc}", file=sys.stderr)
                return 2
        if args.compile_compare:
            return _lazy("tandem.bench.compile_compare")(args)
        return _lazy("tandem.bench.shape" if args.shape else module)(args)
    return run


def add_bench_engines(bench_commands) -> None:
    """`tandem bench engines`: the library's generate() against block, AR and verified modes."""
    p = bench_commands.add_parser("engines", help="library generate() vs block, AR and verified modes, batch 1 and 8")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: a tiny random model)")
    p.add_argument("--quick", action="store_true", help="fewer prompts and repeats")
    p.add_argument("--json", default=None, help="write one record per mode and batch size here")
    p.add_argument("--steps", type=int, default=12, help="denoising steps per canvas")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument("--modes", default="reference,reference_ar,block,ar,verified",
                   help="comma-separated subset to run (ar is needed; reference_ar: transformers' own causal LM of an imported checkpoint; "
                        "ar_no_lookup: AR one token per call)")
    p.add_argument("--max-new-tokens", type=_bounded(int, 1), default=None, help="tokens per answer (default: one canvas of the checkpoint)")
    p.add_argument("--batch-one", action="store_true", help="batch 1 only (default: batches 1 and 8)")
    p.add_argument("--write-profile", action="store_true", help="write cost_profile.json (ms per forward by mode and batch) beside the checkpoint")
    p.add_argument("--acceptance-from", type=_existing_file, default=None, help="with --write-profile: `tandem eval model --json` output whose verified records give acceptance per task")
    p.add_argument("--shape", choices=["26b-a4b"], default=None, help="a random-weight model of a published checkpoint's shapes instead of a checkpoint (lab/model/configs)")
    p.add_argument("--layers", type=_bounded(int, 1), default=None, help="with --shape: decoder layers (default: all of the checkpoint's)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="bfloat16", help="with --shape: weight dtype")
    p.add_argument("--device", default="cpu", help="with --shape: cpu or cuda[:N]")
    p.add_argument("--batches", type=_batch_sizes, default=None, help="with --shape: comma-separated batch sizes (default 1,8)")
    p.add_argument("--text-overrides", type=_json_object, default={},
                   help="with --shape: text-config fields to override, as JSON (a narrow model: the GPU check's CPU dry run)")
    p.add_argument("--quantization", choices=["none", "fp8"], default="none", help="with --shape: the weights' storage (engines/model/quantization.py)")
    p.add_argument("--compile-compare", action="store_true",
                   help="eager and compiled model calls side by side: tok/s, operator dispatches per call, host syncs, identity")
    p.add_argument("--stop-check-every", type=_bounded(int, 1), default=None,
                   help="with --compile-compare: denoising steps between reads of the stop flags (default 1; 4 with --shape)")
    p.add_argument("--dense-experts-max-rows", type=_bounded(int, 0), default=None,
                   help="with --compile-compare: the compiled path's bound on tokens x experts for the dense experts path "
                        "(engines/model/experts.py; 0: never dense, a large number: dense for every call the gathered path does not take)")
    p.set_defaults(func=_lazy_shape_or("tandem.bench.engines"))


def main_bench_engines(argv: list[str] | None = None) -> int:
    """`tandem bench engines` alone, without the rest of the CLI (scripts/gpu/check.sh runs it on a
    machine that has only the engines' dependencies)."""
    import sys

    parser = argparse.ArgumentParser(prog="bench")
    add_bench_engines(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["engines", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


def register(commands, bench_commands):
    """Add the engine-side subcommands; returns the `eval` subcommands, for the router's `eval structured`."""
    p = commands.add_parser("train", help="train the embedded tiny DiffusionGemma on the task suite (or fine-tune one)")
    p.add_argument("--out", default="runs/tandem-tiny", help="run directory: checkpoint, train_state.pt, train_log.jsonl")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--minutes", type=_bounded(float, 0, low_open=True), default=90.0, help="wall-clock budget, counted across resumes")
    p.add_argument("--steps", type=_bounded(int, 1), default=None, help="step budget (default: the --minutes budget alone bounds the run and the lr decay)")
    p.add_argument("--init", default=None, help="start from this checkpoint directory instead of from scratch")
    p.add_argument("--lr", type=_bounded(float, 0, 1, low_open=True), default=2e-3, help="peak learning rate")
    p.add_argument("--warmup", type=_bounded(int, 0), default=100, help="linear warm-up steps")
    p.add_argument("--decay-frac", type=_bounded(float, 0, 1, low_open=True), default=0.15, help="final share of the run (steps, or minutes without --steps) with linear lr decay to 10%%")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_lazy("lab.model.train"))

    add_bench_engines(bench_commands)

    p = bench_commands.add_parser("verified", help="adaptive verified decoding against AR, prompt by prompt: the suite and realistic prompts")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("--n", type=_bounded(int, 1), default=4, help="suite items per family (summarize, plan, code)")
    p.add_argument("--prompts", type=_existing_file, default=None, help="realistic prompts, JSONL (default: tests/data/realistic_prompts.jsonl)")
    p.add_argument("--max-tokens", type=_bounded(int, 1), default=256)
    p.add_argument("--repeat", type=_bounded(int, 1), default=3, help="runs per prompt and mode (medians)")
    p.add_argument("--batch", type=_bounded(int, 1), nargs="+", default=[1], help="batch sizes (a chunk of prompts decodes together)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--write-profile", action="store_true", help="first measure draft and AR steps into the checkpoint's cost_profile.json")
    p.add_argument("--json", default=None, help="write every prompt's figures and the summary here")
    p.add_argument("--plot", default=None, help="PNG of verified time over AR time per prompt and batch size")
    p.add_argument("--no-router-lengths", action="store_true",
                   help="send no expected length (by default each prompt carries the shipped router's p90 prediction, as served)")
    p.set_defaults(func=_lazy("tandem.bench.verified"))

    p = bench_commands.add_parser("prefix", help="prefix reuse against none: time to first token and throughput with a 1k-3.5k-token shared system prompt")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("--quick", action="store_true", help="1k and 2k-token prefixes, 3 turns")
    p.add_argument("--modes", default="ar,verified,block", help="comma-separated modes")
    p.add_argument("--turns", type=_bounded(int, 1), default=None, help="turns per prefix and mode (default 5, quick 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--json", default=None, help="write the records here")
    p.add_argument("--write-profile", action="store_true", help="record the prefill cost per prompt token in the checkpoint's cost_profile.json")
    p.set_defaults(func=_lazy("tandem.bench.prefix"))

    p = commands.add_parser("eval", help="evaluate a checkpoint")
    eval_commands = p.add_subparsers(dest="eval", required=True, metavar="WHAT")
    p = eval_commands.add_parser("model", help="task-suite quality per family in block (by steps and canvas), verified and AR mode")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("--quick", action="store_true", help="4 items per family, block at 4 and 12 steps only")
    p.add_argument("--n", type=int, default=None, help="test items per family (default: 8, or 4 with --quick)")
    p.add_argument("--families", default=None, help="comma-separated families (default: all)")
    p.add_argument("--json", default=None, help="write one record per family, mode, steps and canvas here")
    p.add_argument("--plot", default=None, help="save a PNG of quality against denoising steps here")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.set_defaults(func=_lazy("lab.model.evaluate"))
    evals = eval_commands

    p = commands.add_parser("demo", help="decode one prompt in block, verified and AR mode and print the stats")
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: the shipped model)")
    p.add_argument("prompt", nargs="?", default=None)
    p.add_argument("--schema", default=None, help="JSON Schema of the answer (default: name and city)")
    p.add_argument("--free", action="store_true", help="no schema: decode the prompt as free text")
    p.set_defaults(func=_lazy("tandem.demo"))
    return evals
