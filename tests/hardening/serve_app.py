"""Runs the Tandem app in its own process and Ray cluster, for the hardening tests.

    python -m tests.hardening.serve_app PORT ARGS_JSON [GATEWAY_REPLICAS]

A child process rather than `ray.init()` in pytest: tests/app keeps its own session-wide
cluster alive in the pytest process, and a separate cluster lets these tests kill replicas
and stop Redis without touching it. Prints READY when the app answers; SIGTERM shuts it down.
"""

from __future__ import annotations

import json
import signal
import sys
import threading


def main(port: int, args: dict, gateway_replicas: int = 1) -> None:
    import ray

    from tandem.local_app import start_app

    app = start_app(args, port=port, new_cluster=True, ready_timeout_s=410, gateway_replicas=gateway_replicas)
    print(f"SESSION_DIR {ray._private.worker._global_node.get_session_dir_path()}", flush=True)  # where the replicas log
    print("READY", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    app.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), json.loads(sys.argv[2]), *(int(x) for x in sys.argv[3:4]))
