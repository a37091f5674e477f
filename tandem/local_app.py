"""`start_app(args)`: the Tandem app on a local Ray cluster with HTTP on a free port, ready when it
returns. One helper for the tests, the hardening tests' child process and `tandem bench serve`.

    app = start_app({"checkpoint": ...})   # LocalApp(url, stop)
    ...
    app.stop()
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

READY_TIMEOUT_S = 120.0
# Serve kills a proxy that is not ready 5 s after it starts (its health check: 10 s); on a busy
# 2-core machine a new proxy's imports alone can take longer, and the app never comes up.
BUSY_MACHINE_SERVE_TIMEOUTS = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60", "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "30"}
# Ray starts its workers at nice 15 so that its own daemons stay responsive; here the workers (Serve
# replicas) are the work, and beside any process at nice 0 a nice-15 worker gets ~3% of a core (CFS
# weights 1024 vs 36): on a loaded 2-core machine the test app took most of an hour to start.
# Read by the raylet at start: `tandem serve` passes it to `serve run` too.
WORKER_PRIORITY = {"RAY_worker_niceness": "0"}
# The proxy's limits in serve_config.yaml's http_options (tests/hardening/test_slow_clients.py keeps them equal);
# the header and body-arrival bounds live in the app itself (router/gateway/read_limits.py, ReadLimits).
HTTP_LIMITS = {"request_timeout_s": 300, "keep_alive_timeout_s": 90}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalApp:
    url: str  # http://127.0.0.1:PORT
    stop: Callable[[], None]  # shuts the app and the Ray cluster down


def start_app(args: dict | None = None, port: int | None = None, num_cpus: int = 2, new_cluster: bool = False,
              ready_timeout_s: float = READY_TIMEOUT_S, gateway_replicas: int = 1) -> LocalApp:
    """Start Ray (`num_cpus`; a fresh local cluster with `new_cluster`), Serve on `port` (default:
    a free one) and the app built from `args`; wait until /ready answers 200 (AssertionError after
    `ready_timeout_s`)."""
    import ray
    from ray import serve

    from router.app import application
    from router.gateway.request_ids import PROXY_CALLBACK_ENV

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # read by the raylet, the Serve controller and the HTTP proxy Ray starts next
    for name, value in (BUSY_MACHINE_SERVE_TIMEOUTS | WORKER_PRIORITY | PROXY_CALLBACK_ENV).items():
        os.environ.setdefault(name, value)
    ray.init(address="local" if new_cluster else None, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    port = port or free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port, **HTTP_LIMITS})
    serve.run(application(args or {}, gateway_replicas=gateway_replicas), name="tandem", route_prefix="/")
    url = f"http://127.0.0.1:{port}"

    def stop() -> None:
        serve.shutdown()
        ray.shutdown()

    if not became_ready(url, time.monotonic() + ready_timeout_s):
        stop()
        raise AssertionError(f"the app did not get ready in {ready_timeout_s:.0f} s")
    return LocalApp(url, stop)


def became_ready(url: str, deadline: float) -> bool:
    """Poll `url`/ready until it answers 200 (True) or `deadline` (time.monotonic()) passes (False)."""
    import httpx

    while True:
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
