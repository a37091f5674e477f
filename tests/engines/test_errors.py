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


# ---- the context limit: prompt + max_tokens, the same in every mode --------------------------------


@pytest.fixture
def positions_seen(monkeypatch):
    """The highest position any encoder or decoder pass used, over the calls made while it is active."""
    from engines.batch.sequence_batch import SequenceBatch
    from engines.batch.static_batch import StaticSequenceBatch

    seen = []

    def spies(encode, canvas_inputs):
        def spy_encode(self, tokens, valid=None, logits="last"):
            out = encode(self, tokens, valid, logits)
            seen.append(int(self.lengths().max()) - 1)  # the last token written sits at position length - 1
            return out

        def spy_canvas_inputs(self, canvas_length):
            positions, masks = canvas_inputs(self, canvas_length)  # positions (B, C)
            seen.append(int(positions.max()))
            return positions, masks

        return spy_encode, spy_canvas_inputs

    # both batch layouts: the eager one and the slot cache's (a compiled engine's, TANDEM_TEST_COMPILE=on)
    for cls in (SequenceBatch, StaticSequenceBatch):
        spy_encode, spy_canvas_inputs = spies(cls.__dict__["encode"], cls.__dict__["canvas_inputs"])
        monkeypatch.setattr(cls, "encode", spy_encode)
        monkeypatch.setattr(cls, "canvas_inputs", spy_canvas_inputs)
    return seen


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
@pytest.mark.parametrize("margin", [0, 1, 5])
def test_a_short_prompt_may_ask_for_the_rest_of_the_context(engine, mode, margin):
    # Block mode used to round max_tokens up to whole canvases (plus a slot) before this check, so a
    # request AR serves was refused in block and verified mode: one rule now, prompt + max_tokens.
    prompt = engine.prompt_ids(chat("Hi"))
    request = chat("Hi", mode=mode, max_new_tokens=engine.context_length - len(prompt) - margin)
    ids, _ = engine.validate(request)
    assert ids == prompt
    too_many = chat("Hi", mode=mode, max_new_tokens=engine.context_length - len(prompt) + 1)
    with pytest.raises(ContextLengthError, match=f"context of {engine.context_length} tokens") as info:
        engine.validate(too_many)
    assert info.value.status == 400 and info.value.code == "context_length_exceeded"


def near_the_end(engine, mode, room, **kw) -> GenerationRequest:
    """A request whose prompt leaves `room` positions of the context, and that asks for all of them."""
    return GenerationRequest(prompt=[5] * (engine.context_length - room), mode=mode, max_new_tokens=room, stop_token_ids=[],
                             canvas=16, max_denoising_steps=2, seed=0, **kw)


def test_block_sizes_its_last_canvas_down_to_the_context(engine, positions_seen):
    result = engine.generate(near_the_end(engine, "block", 20))  # one canvas of 16, then one of 4
    assert len(result.token_ids) == 20 and result.finish_reason == "length"
    assert len(result.stats.steps_per_canvas) == 2
    assert max(positions_seen) == engine.context_length - 1  # the last position, and none past it


def test_verified_sizes_its_drafts_down_to_the_context(engine, positions_seen, drafts_anywhere):
    result = engine.generate(near_the_end(engine, "verified", 20))
    assert max(positions_seen) <= engine.context_length - 1
    ar = engine.generate(near_the_end(engine, "ar", 20))
    assert result.token_ids == ar.token_ids and len(ar.token_ids) == 20  # still lossless (greedy)
    assert result.stats.drafted < 16 * len(result.stats.steps_per_canvas)  # drafts shorter than the canvas


@pytest.mark.parametrize("mode", ["block", "verified"])
def test_a_row_near_the_end_changes_no_other_rows_tokens(engine, mode, drafts_anywhere):
    # The row near the end goes on in a batch of its own; the other row keeps its full canvases.
    near = near_the_end(engine, mode, 20)
    short = chat("Plan: search the web, then email Bob.", mode=mode, max_new_tokens=40, stop_token_ids=[], canvas=16,
                 max_denoising_steps=2, seed=1)
    together = engine.generate_batch([near, short])
    assert [r.token_ids for r in together] == [engine.generate(near).token_ids, engine.generate(short).token_ids]
    assert len(together[1].token_ids) == 40
