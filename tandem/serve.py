"""`tandem serve`: run the Ray Serve app from serve_config.yaml (`serve run` under the hood), and
say once, in one line, when it is ready: its URL, checkpoint, engines and policy version."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "serve_config.yaml"
READY_WAIT_S = 900.0  # a cold start on a busy machine (Ray, three replicas, model loads) takes minutes


def config_port(config: Path) -> int:
    import yaml

    return int(((yaml.safe_load(config.read_text()) or {}).get("http_options") or {}).get("port", 8000))


def announce(port: int, alive=lambda: True, wait_s: float = READY_WAIT_S) -> bool:
    """Print one line once the app on `port` answers /ready (False if it never did while `alive()`)."""
    from tandem.doctor import running_tandem

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and alive():
        serving = running_tandem(port)
        if serving:
            console = (f"; console at http://localhost:{port}/console" if os.environ.get("TANDEM_ADMIN_TOKEN")
                       else "; set TANDEM_ADMIN_TOKEN for the console and admin API")
            print(f"Tandem ready at http://localhost:{port}/v1 ({serving}){console}", flush=True)
            return True
        time.sleep(1.0)
    return False


def served_checkpoint(config: Path) -> str:
    """The checkpoint the config's app serves: its `checkpoint` argument, else $TANDEM_CHECKPOINT or the default."""
    import yaml

    from engines.defaults import default_checkpoint

    apps = (yaml.safe_load(config.read_text()) or {}).get("applications") or [{}]
    return (apps[0].get("args") or {}).get("checkpoint") or default_checkpoint()


def import_default(config: Path) -> None:
    """Import the embedded Gemma here, once, before the replicas start: the notice and the minutes it takes are
    seen in this console, not in a replica's log (each replica would otherwise wait on the first one's import)."""
    if served_checkpoint(config) != "gemma3-270m":
        return
    from engines.model.gemma3_import import import_gemma3, imported, default_dir

    if not imported(default_dir()):
        print("first run: importing Gemma 3 270M from its package (a few minutes, once)", flush=True)
        import_gemma3()


def main(args) -> int:
    config = Path(args.config or DEFAULT_CONFIG)
    if not config.is_file():
        print(f"tandem serve: no config at {config}", file=sys.stderr)
        return 2
    serve_bin = shutil.which("serve", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if serve_bin is None:
        print("tandem serve: Ray Serve's `serve` command is missing; install ray[serve]", file=sys.stderr)
        return 2
    from tandem.local_app import WORKER_PRIORITY
    from router.gateway.request_ids import PROXY_CALLBACK_ENV

    import_default(config)
    env = WORKER_PRIORITY | PROXY_CALLBACK_ENV | os.environ | {"RAY_USAGE_STATS_ENABLED": "0"}  # the proxy bounds x-request-id
    port = config_port(config)
    print(f"serving {config}: the OpenAI endpoint will be at http://localhost:{port}/v1", flush=True)
    child = subprocess.Popen([serve_bin, "run", str(config)], env=env)
    threading.Thread(target=announce, args=(port, lambda: child.poll() is None), daemon=True).start()
    try:
        return child.wait()
    except KeyboardInterrupt:  # Ctrl-C: let `serve run` shut the app down
        child.send_signal(signal.SIGINT)
        return child.wait()


def register(commands) -> None:
    p = commands.add_parser("serve", help="serve the OpenAI-compatible endpoint (serve run serve_config.yaml)")
    p.add_argument("--config", default=None, help="Ray Serve config (default: the repo's serve_config.yaml)")
    p.set_defaults(func=main)
