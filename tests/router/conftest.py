"""Router fixtures; the Redis ones are shared from tests/conftest.py."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model():
    """The shipped router model (loaded once; loading takes about a second)."""
    from router.decision.classifier import load_model

    return load_model()


@pytest.fixture(scope="session")
def held_out():
    from lab.routing.dataset import TEST_PATH, load_jsonl

    return load_jsonl(TEST_PATH)


@pytest.fixture
def store(prefix):
    """A Responses API conversation store (router.gateway.responses_store) on the test Redis, under `prefix`."""
    from router.gateway.responses_store import ResponseStore
    from tests.policies.helpers import redis_client

    client = redis_client()
    yield ResponseStore(client, prefix=prefix + "response:")
    client.close()


@pytest.fixture
def route(model):
    """A Router on the shipped model under tests.router.helpers.policy with `changes`."""
    from router import Router
    from tests.router.helpers import policy

    def make(**changes) -> Router:
        return Router(model=model, store=policy(**changes))

    return make
