"""Shared fixtures: a tiny random DiffusionGemma (real model class, real tokenizer) and its engine, and real Redis."""

from __future__ import annotations

import os

import pytest
import torch

from hypothesis import settings as hypothesis_settings

from tests.policies.helpers import REDIS_URL, PrivateRedis, delete_prefix, redis_client, unique_prefix

# Property tests: in CI a fixed, derandomized run (the same examples every time, no database), so a
# red build replays and a green one means the same thing twice; elsewhere random examples, with
# failures kept in the local .hypothesis/ database and replayed first on the next run. Loaded here,
# before any test module builds its @settings, which inherit the profile's database and derandomize.
# HYPOTHESIS_PROFILE=ci|dev picks one explicitly.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# Tiny models gain nothing from intra-op threads, and spinning OpenMP threads on a busy 2-core
# machine made decode 20-40x slower in measurements here.
torch.set_num_threads(int(os.environ.get("TANDEM_TEST_THREADS", "1")))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    from lab.model.tiny import save_tiny_checkpoint

    return save_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt", seed=0, canvas_length=32)


@pytest.fixture(scope="session")
def engine(tiny_checkpoint):
    from engines import DiffusionEngine

    # TANDEM_TEST_COMPILE=on runs every engine test on compiled model calls (engines/compiled.py)
    return DiffusionEngine.from_checkpoint(tiny_checkpoint, compile=os.environ.get("TANDEM_TEST_COMPILE", "off"))


@pytest.fixture
def drafts_anywhere(monkeypatch):
    """Verified mode drafts whatever AR's doubt. A row alone drafts only where AR is sure of its next
    token (engines.drafting.SURE_ENTROPY), and the random model is unsure of every token (its
    entropy is near log V), so without this it would never draft: tests of drafting on it use this."""
    import engines.verified

    monkeypatch.setattr(engines.verified, "SURE_ENTROPY", float("inf"))


# ---- Redis (real; tests fail, not skip, without it) ------------------------------------------------
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
