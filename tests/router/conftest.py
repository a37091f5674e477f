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
