from __future__ import annotations

import pytest

from tests.policies.helpers import REDIS_URL, PrivateRedis, delete_prefix, redis_client, unique_prefix


@pytest.fixture
def redis_url() -> str:
    redis_client().close()  # fail, not skip, without Redis
    return REDIS_URL


@pytest.fixture
def prefix(redis_url):
    """A key prefix no other test uses; its keys are deleted afterwards."""
    p = unique_prefix()
    yield p
    client = redis_client()
    delete_prefix(client, p)
    client.close()


@pytest.fixture
def private_redis():
    server = PrivateRedis()
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def model():
    """The shipped router model (loaded once; loading takes about a second)."""
    from router.model import load_model

    return load_model()


@pytest.fixture(scope="session")
def held_out():
    from router.dataset import TEST_PATH, load_jsonl

    return load_jsonl(TEST_PATH)
