"""Runs the Tandem app in its own process and Ray cluster, for the hardening tests.

    python -m tests.hardening.serve_app PORT ARGS_JSON

A child process rather than `ray.init()` in pytest: tests/app keeps its own session-wide
cluster alive in the pytest process, and a separate cluster lets these tests kill replicas
and stop Redis without touching it. Prints READY when the app answers; SIGTERM shuts it down.
"""

from __future__ import annotations

import json
import signal
import sys
import threading


def main(port: int, args: dict) -> None:
    import ray
    from ray import serve

    from router.app import build_app

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name="tandem", route_prefix="/")
    print("READY", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), json.loads(sys.argv[2]))
