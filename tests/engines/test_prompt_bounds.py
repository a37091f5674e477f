"""engines.prompt_bounds: the character bound refuses only prompts that cannot fit, the bounded
encoding gives the tokenizer's own ids and stops counting past the limit, and the engine refuses an
oversized prompt without rendering or tokenizing it (and off its event loop)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.defaults import SHIPPED_CHECKPOINT
from engines.errors import ContextLengthError
from engines.prompt_bounds import WINDOW_CHARS, PromptEncoder, PromptLimit, check_chars, max_chars_per_token
from engines.replica.scheduler import Scheduler, SchedulerConfig
from tests.engines.factories import chat

# Pieces that stress a byte-level BPE: multi-byte characters, digits (one token each), runs of
# spaces and newlines the template trims, and the special tokens' own spelling inside a message.
PIECES = ["hello", " world", "  ", "\n", "\t", "Ünïcödé", " 😀", "1234567890", ",", "<start_of_turn>", "<end_of_turn>\n", "<bos>", "x" * 40]
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=400).map("".join)
conversations = st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), texts), min_size=1, max_size=6)


@pytest.fixture(scope="module")
def shipped_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT)


def test_the_shipped_tokenizers_longest_token_covers_16_characters(shipped_tokenizer):
    assert max_chars_per_token(shipped_tokenizer) == 16  # "<start_of_image>"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=conversations)
def test_the_character_bound_is_a_lower_bound_on_the_tokens(shipped_tokenizer, conversation):
    """No prompt that fits is ever refused: its characters over 16 never exceed its real tokens."""
    messages = [{"role": role, "content": text} for role, text in conversation]
    rendered = shipped_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    tokens = len(shipped_tokenizer.encode(rendered, add_special_tokens=False))
    check_chars(messages, None, 0, PromptLimit(context_tokens=tokens, max_chars_per_token=16))  # exactly full: passes
    chars = sum(len(m["content"].strip()) for m in messages)
    if chars:  # and the bound does refuse below its own count
        with pytest.raises(ContextLengthError):
            check_chars(messages, None, 0, PromptLimit(context_tokens=-(-chars // 16) - 1, max_chars_per_token=16))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=conversations, repeat=st.integers(1, 40))
def test_the_bounded_encoding_gives_the_tokenizers_own_ids(shipped_tokenizer, conversation, repeat):
    messages = [{"role": role, "content": text} for role, text in conversation] * repeat  # often over one window
    rendered = shipped_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert PromptEncoder(shipped_tokenizer, 10**9).encode(rendered, 10**9, 0) == shipped_tokenizer.encode(rendered, add_special_tokens=False)


def test_the_bounded_encoding_stops_counting_past_the_limit(shipped_tokenizer):
    """60 turns of 1,000 digits (60,000 tokens: digits are one token each) against a 4,096-token
    context: refused after encoding about one window past the limit, not the whole prompt."""
    encoder = PromptEncoder(shipped_tokenizer, 4096)
    rendered = shipped_tokenizer.apply_chat_template([{"role": "user", "content": "7" * 1000}] * 60, add_generation_prompt=True,
                                                     tokenize=False)
    encoded = []
    real = encoder.backend

    class Counting:
        def encode(self, text, add_special_tokens):
            encoded.append(len(text))
            return real.encode(text, add_special_tokens=add_special_tokens)

    encoder.backend = Counting()
    with pytest.raises(ContextLengthError) as refused:
        encoder.encode(rendered, 4096 - 16, 16)
    assert refused.value.status == 400 and refused.value.code == "context_length_exceeded"
    assert sum(encoded) <= 4096 + 2 * WINDOW_CHARS and sum(encoded) < len(rendered) / 4, f"encoded {sum(encoded)} of {len(rendered)} characters"


def test_an_oversized_prompt_is_refused_by_its_length_before_it_is_rendered(engine, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("an oversized prompt reached the chat template or the tokenizer")

    monkeypatch.setattr(engine.tokenizer, "apply_chat_template", never)
    monkeypatch.setattr(engine.prompt_encoder, "backend", None)
    big = "word " * 800_000  # 4 MB
    for request in (chat(big, mode="ar", max_new_tokens=16), chat("hi " * 7000, mode="ar", max_new_tokens=3000)):
        with pytest.raises(ContextLengthError) as refused:
            engine.validate(request)
        assert "characters" in refused.value.message and refused.value.param == "messages"
    from engines.types import GenerationRequest

    with pytest.raises(ContextLengthError):
        engine.validate(GenerationRequest(prompt=big, mode="ar", max_new_tokens=16))
    with pytest.raises(ContextLengthError):
        engine.validate(GenerationRequest(prompt=[5] * 5000, mode="ar", max_new_tokens=16))


def test_a_prompt_that_fits_is_served_and_one_token_more_is_not(engine):
    """At the edge the exact count decides, with the same message as ever."""
    ids = engine.validate(chat("Tell me a story about a fox.", mode="ar", max_new_tokens=1))[0]
    room = engine.context_length - len(ids)
    engine.validate(chat("Tell me a story about a fox.", mode="ar", max_new_tokens=room))
    with pytest.raises(ContextLengthError):
        engine.validate(chat("Tell me a story about a fox.", mode="ar", max_new_tokens=room + 1))


def test_the_scheduler_prepares_a_request_off_its_event_loop(engine, monkeypatch):
    """While a request is being validated (rendered, tokenized), the replica's event loop answers
    load probes: preparing runs in a thread."""
    preparing, release = threading.Event(), threading.Event()
    validate = engine.validate

    def slow_validate(request):
        preparing.set()
        assert release.wait(30), "never released"
        return validate(request)

    monkeypatch.setattr(engine, "validate", slow_validate)
    scheduler = Scheduler(engine, SchedulerConfig(max_batch_size=2, max_queue=4))

    async def scenario():
        submitted = asyncio.ensure_future(scheduler.submit(chat("Hi", mode="ar", max_new_tokens=2)))
        assert await asyncio.to_thread(preparing.wait, 30)
        load = scheduler.load()  # the loop is free: this runs while validation is blocked
        release.set()
        return load, await submitted

    try:
        load, result = asyncio.run(scenario())
    finally:
        release.set()
        scheduler.close()
    assert load.queued == 0 and result.finish_reason in ("stop", "length")
