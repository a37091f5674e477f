"""AR mode: the KV-cached loop against a full recompute, and sampling options."""

import pytest
import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.model.logits import soft_capped_logits
from tests.engines.factories import PROMPTS, chat


def full_recompute_logits(engine, tokens):
    """Encoder over the whole sequence at once, no cache reuse: logits (L, V)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=engine.config.get_text_config(decoder=True))
    with torch.inference_mode():
        out = engine.model.model.encoder(input_ids=torch.tensor([tokens]), cache=cache)
        return soft_capped_logits(engine.model, out.last_hidden_state)[0]


@pytest.mark.parametrize("prompt", PROMPTS[:4])
def test_kv_cache_equals_full_recompute(engine, prompt):
    result = engine.generate(chat(prompt, mode="ar", max_new_tokens=24, stop_token_ids=[]))
    ids = engine.prompt_ids(chat(prompt))
    # Replay the cached path to collect its logits, one token at a time.
    batch = SequenceBatch(engine.model, 1, engine.model.device)
    with torch.inference_mode():
        cached = [batch.encode(torch.tensor([ids]), logits="last")[0]]
        for t in result.token_ids[:-1]:
            cached.append(batch.encode(torch.tensor([[t]]), logits="last")[0])
    cached = torch.stack(cached)  # (N, V)
    full = full_recompute_logits(engine, ids + result.token_ids)[len(ids) - 1 : -1]  # (N, V)
    torch.testing.assert_close(cached, full, atol=1e-4, rtol=1e-4)
    assert full.argmax(-1).tolist() == result.token_ids


def test_greedy_is_deterministic_and_ignores_seed(engine):
    a = engine.generate(chat(PROMPTS[0], mode="ar", max_new_tokens=16, seed=1)).token_ids
    b = engine.generate(chat(PROMPTS[0], mode="ar", max_new_tokens=16, seed=2)).token_ids
    assert a == b


def test_sampling_follows_seed(engine):
    make = lambda seed: engine.generate(chat(PROMPTS[0], mode="ar", max_new_tokens=24, temperature=1.5, seed=seed, stop_token_ids=[])).token_ids  # noqa: E731
    assert make(5) == make(5)
    assert make(5) != make(6)


def test_top_k_1_is_greedy(engine):
    greedy = engine.generate(chat(PROMPTS[1], mode="ar", max_new_tokens=16)).token_ids
    sampled = engine.generate(chat(PROMPTS[1], mode="ar", max_new_tokens=16, temperature=1.0, top_k=1, seed=3)).token_ids
    assert sampled == greedy


def test_tiny_top_p_is_greedy(engine):
    greedy = engine.generate(chat(PROMPTS[2], mode="ar", max_new_tokens=16)).token_ids
    sampled = engine.generate(chat(PROMPTS[2], mode="ar", max_new_tokens=16, temperature=1.0, top_p=1e-6, seed=3)).token_ids
    assert sampled == greedy


def test_max_new_tokens_and_stats(engine):
    result = engine.generate(chat(PROMPTS[3], mode="ar", max_new_tokens=9, stop_token_ids=[]))
    assert result.finish_reason == "length"
    assert len(result.token_ids) == 9
    assert result.stats.encoder_calls == 9  # prefill gives the first token, 8 more calls
    assert result.stats.decoder_calls == 0


def test_a_vanishing_temperature_is_greedy_not_nan(engine):
    """1.4e-45 (the smallest float32) once overflowed logits / temperature to inf and failed the batch."""
    from tests.engines.factories import chat

    tiny = engine.generate(chat("Name a colour.", mode="ar", temperature=1.4e-45, max_new_tokens=6, seed=1))
    greedy = engine.generate(chat("Name a colour.", mode="ar", temperature=0.0, max_new_tokens=6))
    assert tiny.token_ids == greedy.token_ids
