"""One real Ray Serve app for every end-to-end test: tiny random checkpoint, real Redis policy
store and decisions stream, HTTP on a free port, spans and metrics written to a file."""

from __future__ import annotations

import os
import uuid

import pytest

ADMIN_TOKEN = "test-admin-token-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def redis_url():
    import redis

    url = os.environ.get("TANDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    redis.Redis.from_url(url, socket_timeout=2).ping()  # fail, not skip, without Redis
    return url


@pytest.fixture(scope="session")
def serve_app(tiny_checkpoint, redis_url, tmp_path_factory):
    from lab.cli.local_app import start_app

    prefix = f"tandem-test-{uuid.uuid4().hex[:8]}:"
    spans = tmp_path_factory.mktemp("otel") / "telemetry.jsonl"
    os.environ["TANDEM_ADMIN_TOKEN"] = ADMIN_TOKEN  # inherited by the replicas
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    app = start_app(
        {
            "checkpoint": str(tiny_checkpoint),
            "policy_source": redis_url,
            "key_prefix": prefix,
            "telemetry": f"file:{spans}",
            "request_timeout_s": 60,
            # the random model is unsure of every token: let verified draft anyway (engines.drafting.SURE_ENTROPY)
            "engine": {"threads": 1, "max_batch_size": 4, "max_queue": 16, "sure_entropy": 100.0},
        },
        ready_timeout_s=420,  # a busy CI machine starts Ray slowly (minutes with both cores loaded)
    )
    url = app.url
    yield {"url": url, "prefix": prefix, "spans": spans, "redis_url": redis_url}
    app.stop()
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
