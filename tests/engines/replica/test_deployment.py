"""The engine deployment (engines.replica.deployment.EngineDeployment), as a plain class in process (what Ray
Serve wraps): it serves only its modes and returns refusals as values (their status intact across
a handle), streams text then the result, and answers the gateway's load poll and info without Ray."""

from __future__ import annotations

import asyncio

import pytest

from engines.errors import InvalidRequestError, TandemError
from engines.types import GenerationResult
from tests.engines.factories import chat


@pytest.fixture(scope="module")
def block_engine(tiny_checkpoint):
    from engines.replica.deployment import EngineDeployment

    deployment = EngineDeployment(tiny_checkpoint, modes=("block", "verified"), max_batch_size=2, max_queue=3, max_wait_s=0.001)
    yield deployment
    deployment.scheduler.close()


def test_a_mode_it_does_not_serve_is_a_400_value_not_an_exception(block_engine):
    refused = asyncio.run(block_engine.generate(chat("Hi", mode="ar", max_new_tokens=4)))
    assert isinstance(refused, InvalidRequestError) and refused.status == 400 and refused.param == "mode"
    assert "['block', 'verified']" in str(refused)


def test_it_answers_and_streams_text_then_the_result(block_engine):
    request = chat("Hi", mode="block", seed=2, max_new_tokens=12, max_denoising_steps=3)
    whole = asyncio.run(block_engine.generate(request))

    async def streamed():
        return [item async for item in block_engine.stream(chat("Hi", mode="block", seed=2, max_new_tokens=12, max_denoising_steps=3))]

    *texts, last = asyncio.run(streamed())
    assert isinstance(whole, GenerationResult) and isinstance(last, GenerationResult) and all(isinstance(t, str) for t in texts)
    assert "".join(texts) == last.text == whole.text and last.token_ids == whole.token_ids


def test_a_refused_stream_yields_the_error(block_engine):
    async def streamed():
        return [item async for item in block_engine.stream(chat("Hi", mode="ar"))]

    (only,) = asyncio.run(streamed())
    assert isinstance(only, TandemError) and only.status == 400


def test_the_load_poll_and_info_say_what_it_holds_and_serves(block_engine, tiny_checkpoint):
    load = asyncio.run(block_engine.load())
    assert (load.capacity, load.max_queue) == (2, 3) and load.queued == 0 and load.pid is not None
    assert load.node is None and load.replica is None  # outside Ray: nothing to name
    assert "prefix_cache" in load.stats
    info = block_engine.info()
    assert info.modes == ["block", "verified"] and info.checkpoint == tiny_checkpoint.name and info.canvas_length == 32
    assert info.context_length > info.canvas_length
    block_engine.check_health()  # its scheduler thread is alive: no error
