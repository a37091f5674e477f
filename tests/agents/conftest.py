"""One Tandem app on the shipped checkpoint for the agent frameworks' own tests: LangChain's
standard chat-model suite and the OpenAI Agents SDK. The shipped model was trained on tool calls
(lab/model/tasks.py, family "tool"), so it decides on its own when to call one."""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture(scope="package")  # stopped before tests/app starts its own app in this process
def agents_app():
    from engines.defaults import SHIPPED_CHECKPOINT
    from tandem.local_app import start_app

    url = os.environ.get("TANDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    prefix = f"tandem-agents-{uuid.uuid4().hex[:8]}:"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    app = start_app({"checkpoint": str(SHIPPED_CHECKPOINT), "redis_url": url, "key_prefix": prefix, "request_timeout_s": 120,
                     "engine": {"threads": 1, "max_batch_size": 4, "max_queue": 32}}, ready_timeout_s=420,
                    new_cluster=True)  # never a cluster already running here (another test's, a user's)
    yield app.url
    app.stop()
    import redis

    client = redis.Redis.from_url(url)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)


@pytest.fixture(scope="package")
def agents_url(agents_app) -> str:
    return agents_app
