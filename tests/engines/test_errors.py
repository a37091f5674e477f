"""Bad input gets a typed error that names the limit, before any model call; the engine keeps working."""

import pytest

from engines import ContextLengthError, GenerationRequest, InvalidRequestError
from tests.engines.factories import chat

BAD = [
    (GenerationRequest(prompt=""), "empty", "prompt"),
    (GenerationRequest(prompt=[]), "empty", "prompt"),
    (GenerationRequest(messages=[]), "empty", "messages"),
    (GenerationRequest(messages=[{"role": "user", "content": "  "}]), "empty", "messages"),
    (GenerationRequest(), "exactly one", "prompt"),
    (GenerationRequest(prompt="hi", messages=[{"role": "user", "content": "hi"}]), "exactly one", "prompt"),
    (GenerationRequest(prompt=[1, 2, 10**9]), "integers in", "prompt"),
    (chat("hi", max_new_tokens=0), "positive integer", "max_tokens"),
    (chat("hi", max_new_tokens=-3), "positive integer", "max_tokens"),
    (chat("hi", temperature=-0.1), ">= 0", "temperature"),
    (chat("hi", temperature=float("nan")), ">= 0", "temperature"),
    (chat("hi", top_p=0.0), r"\(0, 1\]", "top_p"),
    (chat("hi", top_p=1.5), r"\(0, 1\]", "top_p"),
    (chat("hi", top_k=-1), ">= 0", "top_k"),
    (chat("hi", stop=[""]), "non-empty", "stop"),
    (chat("hi", mode="turbo"), "block", "mode"),
    (chat("hi", mode="block", canvas=0), r"\[1, 32\]", "canvas"),
    (chat("hi", mode="block", canvas=33), "config.canvas_length", "canvas"),
    (chat("hi", mode="verified", max_denoising_steps=0), r"\[1, 1000\]", "max_denoising_steps"),
    (chat("hi", mode="block", t_min=0.9, t_max=0.5), "t_min < t_max", "t_min"),
    (chat("hi", mode="block", entropy_bound=0.0), "entropy_bound", "entropy_bound"),
]


@pytest.mark.parametrize(("request_", "message", "param"), BAD)
def test_bad_input_is_refused_with_the_limit(engine, request_, message, param):
    with pytest.raises(InvalidRequestError, match=message) as info:
        engine.generate(request_)
    assert info.value.status == 400
    assert info.value.param == param
    assert engine.generate(chat("still works?", max_new_tokens=3, mode="ar")).finish_reason in ("stop", "length")


@pytest.mark.parametrize("mode", ["ar", "block"])
def test_prompt_beyond_the_context(engine, mode):
    too_long = GenerationRequest(prompt=[5] * engine.context_length, mode=mode, max_new_tokens=4)
    with pytest.raises(ContextLengthError, match=f"context of {engine.context_length} tokens") as info:
        engine.generate(too_long)
    assert info.value.code == "context_length_exceeded"
    fits = GenerationRequest(prompt=[5] * 20, mode=mode, max_new_tokens=4, seed=0)
    assert len(engine.generate(fits).token_ids) <= 4


def test_one_bad_request_fails_the_batch_before_any_decoding(engine):
    with pytest.raises(InvalidRequestError):
        engine.generate_batch([chat("fine", max_new_tokens=2), chat("bad", top_p=2.0)])
