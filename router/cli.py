"""The `tandem` command line. One entry point; each package registers its own subcommands
(`engines.cli`, `policies.cli`, `router.commands`), and heavy imports happen inside the
command, so `tandem --help` is instant."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tandem", description="Serve block-diffusion LMs behind one OpenAI endpoint.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = commands.add_parser("bench", help="benchmarks that print a table and write JSON")
    bench_commands = bench.add_subparsers(dest="bench", required=True, metavar="WHAT")

    from engines import cli as engines_cli
    from router import bench_serve, doctor, serve_cmd

    serve_cmd.register(commands)
    doctor.register(commands)
    bench_serve.register(bench_commands)
    engines_cli.register(commands, bench_commands)
    for module in ("policies.cli", "router.commands"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ModuleNotFoundError as exc:  # a package not built yet registers nothing
            if exc.name != module:
                raise
            continue
        mod.register(commands, bench_commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        from engines.errors import EngineError

        if isinstance(exc, EngineError):
            print(f"tandem: {exc.message}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
