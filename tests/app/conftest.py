"""One real Ray Serve app for every end-to-end test: tiny random checkpoint, real Redis policy
store and decisions stream, HTTP on a free port, spans and metrics written to a file."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

ADMIN_TOKEN = "test-admin-token-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def redis_url():
    import redis

    url = os.environ.get("TANDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    redis.Redis.from_url(url, socket_timeout=2).ping()  # fail, not skip, without Redis
    return url


PROFILE = Path(__file__).parents[1] / "data" / "tiny_cost_profile.json"


@pytest.fixture(scope="session")
def app_checkpoint(tiny_checkpoint, tmp_path_factory) -> Path:
    """The tiny checkpoint with a cost profile beside it, as a served checkpoint ships one, so the
    app routes by cost (router.decision.decide) as it does in production. The profile is the tiny
    seed-0 model's, measured by `tandem bench engines --quick --write-profile --threads 1` on the
    2-core VM (Dec 2026), less its per-task figures (`block_steps_by_task`: every canvas at the step
    budget, `verified_rounds_per_canvas`: 0, as the random model never drafts alone), which price
    nothing real for it; the policy's steps and the default acceptance price those instead. The
    engine tests' checkpoint stays without a profile."""
    path = tmp_path_factory.mktemp("app-ckpt") / "ckpt"
    shutil.copytree(tiny_checkpoint, path)
    shutil.copy(PROFILE, path / "cost_profile.json")
    return path


# Package scope: the app stops when tests/app ends, not at the session's end: an idle app still takes
# about a sixth of a core (Serve's controller, proxy and replicas polling), which the Ray group's later
# packages (tests/cluster, tests/hardening) need on a two-core machine.
@pytest.fixture(scope="package")
def serve_app(app_checkpoint, redis_url, tmp_path_factory):
    from tandem.local_app import start_app

    prefix = f"tandem-test-{uuid.uuid4().hex[:8]}:"
    spans = tmp_path_factory.mktemp("otel") / "telemetry.jsonl"
    os.environ["TANDEM_ADMIN_TOKEN"] = ADMIN_TOKEN  # inherited by the replicas
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    app = start_app(
        {
            "checkpoint": str(app_checkpoint),
            "policy_source": redis_url,
            "key_prefix": prefix,
            "telemetry": f"file:{spans}",
            "request_timeout_s": 60,
            # the random model is unsure of every token: let verified draft anyway (engines.modes.verified_drafting.SURE_ENTROPY)
            "engine": {"threads": 1, "max_batch_size": 4, "max_queue": 16, "sure_entropy": 100.0},
        },
        ready_timeout_s=420,  # a busy CI machine starts Ray slowly (minutes with both cores loaded)
        new_cluster=True,  # never a cluster that is already running here (another test's, or a user's `serve run`)
    )
    url = app.url
    yield {"url": url, "prefix": prefix, "spans": spans, "redis_url": redis_url}
    app.stop()
    import redis

    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


@pytest.fixture(scope="package")
def base_url(serve_app):
    return serve_app["url"]


@pytest.fixture
def admin_headers():
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def policy_restored(base_url, admin_headers):
    """For a test that changes the shared app's routing policy: the policy it started with is
    written back after it, pass or fail (a failed assertion in the middle of a policy test left the
    app routing everything to one mode for every test after it). Yields the starting policy."""
    import httpx

    start = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
    routing = lambda p: {k: v for k, v in p.items() if k not in ("version", "description")}  # noqa: E731
    try:
        yield start
    finally:
        live = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
        if routing(live) != routing(start):
            back = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, timeout=10,
                              json={"policy": start | {"version": live["version"]}, "expect_version": live["version"],
                                    "note": "test teardown: the policy the test started from"})
            assert back.status_code == 200, back.text
