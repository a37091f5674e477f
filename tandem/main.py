"""The `tandem` command line. One entry point; each package registers its own subcommands
(`tandem.engines`, `tandem.policy`, `tandem.commands`), and heavy imports happen inside the
command, so `tandem --help` is instant."""

from __future__ import annotations

import argparse
import functools
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tandem", description="Serve block-diffusion LMs behind one OpenAI endpoint.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = commands.add_parser("bench", help="benchmarks that print a table and write JSON")
    bench_commands = bench.add_subparsers(dest="bench", required=True, metavar="WHAT")

    from tandem import engines as engines_cli
    from tandem import policy as policies_cli
    from tandem.bench import chaos as bench_chaos, eval_structured, fp8 as bench_fp8, layouts as bench_layouts, mixed as bench_mixed, serve as bench_serve, structured as bench_structured
    from tandem import checkpoint, commands as router_commands, doctor, serve

    serve.register(commands)
    checkpoint.register(commands)
    doctor.register(commands)
    bench_serve.register(bench_commands)
    bench_layouts.register(bench_commands)
    bench_fp8.register(bench_commands)
    bench_mixed.register(bench_commands)
    bench_chaos.register(bench_commands)
    bench_structured.register(bench_commands)
    eval_commands = engines_cli.register(commands, bench_commands)
    bench_commands.choices["verified"].set_defaults(expected_length=predicted_length)  # as served: the router's length
    eval_structured.register(eval_commands)
    policies_cli.register(commands, bench_commands)
    router_commands.register(commands, bench_commands)
    return parser


def predicted_length(messages: list[dict], max_tokens: int) -> int:
    """The shipped router's p90 answer length for a chat: what the Gateway passes to the engines as
    `expected_tokens` (`tandem bench verified` sends it with each prompt, as served)."""
    from router.decision.features import extract_features

    return _shipped_router().predict(extract_features(messages, max_tokens, None, None, None)).predicted_tokens


@functools.cache
def _shipped_router():
    from router.decision.classifier import load_model

    return load_model()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        from engines.errors import TandemError

        if isinstance(exc, TandemError):
            print(f"tandem: {exc.message}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
