"""`tandem serve`: run the Ray Serve app from serve_config.yaml (`serve run` under the hood)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "serve_config.yaml"


def main(args) -> int:
    config = Path(args.config or DEFAULT_CONFIG)
    if not config.is_file():
        print(f"tandem serve: no config at {config}", file=sys.stderr)
        return 2
    serve_bin = shutil.which("serve", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if serve_bin is None:
        print("tandem serve: Ray Serve's `serve` command is missing; install ray[serve]", file=sys.stderr)
        return 2
    env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0"}
    print(f"serving {config} (OpenAI endpoint at http://localhost:8000/v1 once ready)", flush=True)
    os.execve(serve_bin, [serve_bin, "run", str(config)], env)
    return 0  # not reached


def register(commands) -> None:
    p = commands.add_parser("serve", help="serve the OpenAI-compatible endpoint (serve run serve_config.yaml)")
    p.add_argument("--config", default=None, help="Ray Serve config (default: the repo's serve_config.yaml)")
    p.set_defaults(func=main)
