"""Streaming: deltas arrive as tokens are committed and join to the `generate` text."""

import asyncio

import pytest

from engines import GenerationResult, InvalidRequestError
from tests.engines.factories import PROMPTS, chat


async def collect(engine, request):
    items = [item async for item in engine.stream_with_result(request)]
    assert isinstance(items[-1], GenerationResult)
    return items[:-1], items[-1]


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_stream_joins_to_generate_text(engine, mode, drafts_anywhere):
    request = chat(PROMPTS[0], mode=mode, seed=3, max_new_tokens=40, canvas=8, max_denoising_steps=2, stop_token_ids=[])
    deltas, result = asyncio.run(collect(engine, request))
    assert "".join(deltas) == result.text == engine.generate(request).text
    assert all(deltas)
    if mode == "ar":
        assert len(deltas) > 10  # roughly a delta per token
    if mode == "block":
        assert len(deltas) <= len(result.stats.steps_per_canvas)  # at most one per committed canvas


def test_stream_holds_back_a_stop_string(engine):
    free = engine.generate(chat(PROMPTS[2], mode="ar", max_new_tokens=30, stop_token_ids=[]))
    stop = free.text[12:15]
    request = chat(PROMPTS[2], mode="ar", max_new_tokens=30, stop_token_ids=[], stop=[stop])
    deltas, result = asyncio.run(collect(engine, request))
    assert "".join(deltas) == result.text == free.text[: free.text.find(stop)]


def test_plain_stream_yields_only_text(engine):
    async def run():
        return [d async for d in engine.stream(chat(PROMPTS[1], mode="ar", max_new_tokens=5))]

    assert all(isinstance(d, str) for d in asyncio.run(run()))


def test_stream_validates_before_decoding(engine):
    async def run():
        return [d async for d in engine.stream(chat("x", top_p=0))]

    with pytest.raises(InvalidRequestError):
        asyncio.run(run())
