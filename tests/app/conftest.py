"""One real Ray Serve app for every end-to-end test: tiny random checkpoint, real Redis policy
store and decisions stream, HTTP on a free port, spans and metrics written to a file."""

from __future__ import annotations

import os
import socket
import time
import uuid

import httpx
import pytest

ADMIN_TOKEN = "test-admin-token-" + uuid.uuid4().hex[:8]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url():
    import redis

    url = os.environ.get("TANDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    redis.Redis.from_url(url, socket_timeout=2).ping()  # fail, not skip, without Redis
    return url


@pytest.fixture(scope="session")
def serve_app(tiny_checkpoint, redis_url, tmp_path_factory):
    import ray
    from ray import serve

    from router.app import build_app

    prefix = f"tandem-test-{uuid.uuid4().hex[:8]}:"
    spans = tmp_path_factory.mktemp("otel") / "telemetry.jsonl"
    os.environ["TANDEM_ADMIN_TOKEN"] = ADMIN_TOKEN  # inherited by the replicas
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = build_app(
        {
            "checkpoint": str(tiny_checkpoint),
            "policy_source": redis_url,
            "key_prefix": prefix,
            "telemetry": f"file:{spans}",
            "request_timeout_s": 60,
            "engine": {"threads": 1, "max_batch_size": 4, "max_queue": 16},
        }
    )
    serve.run(app, name="tandem", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.time() < deadline, "the app did not get ready in 60 s"
        time.sleep(0.5)
    yield {"url": url, "prefix": prefix, "spans": spans, "redis_url": redis_url}
    serve.shutdown()
    ray.shutdown()
    import redis

    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


@pytest.fixture(scope="session")
def base_url(serve_app):
    return serve_app["url"]


@pytest.fixture
def admin_headers():
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
