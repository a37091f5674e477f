"""Verified mode is lossless: under greedy decoding it returns exactly AR mode's tokens."""

import pytest
import torch

import engines.verified
from engines.batch import SequenceBatch
from engines import GenerationRequest
from tests.engines.factories import PROMPTS, chat


@pytest.mark.parametrize(("prompt", "max_new_tokens"), [(p, n) for p, n in zip(PROMPTS, [1, 7, 40, 75, 3, 33, 12, 64])])
def test_verified_equals_ar_greedy(engine, prompt, max_new_tokens):
    # A random model's drafts rarely agree with its AR choice: this exercises the correction path
    # (one token per round, so several canvases' worth). Two denoising steps keep it fast.
    ar = engine.generate(chat(prompt, mode="ar", max_new_tokens=max_new_tokens))
    verified = engine.generate(chat(prompt, mode="verified", max_new_tokens=max_new_tokens, seed=0, max_denoising_steps=2))
    assert verified.token_ids == ar.token_ids
    assert verified.finish_reason == ar.finish_reason


def oracle_drafter(engine, corrupt_every):
    """A drafter that proposes AR mode's own greedy continuation with some positions corrupted, so
    rounds accept long prefixes of different lengths per row (what a trained model's drafts do)."""

    def draft(batch, rows, params):
        canvas = torch.zeros(batch.size, params.canvas, dtype=torch.long)
        for b, row in enumerate(rows):
            probe = SequenceBatch(engine.model, 1, batch.mask.device)
            logits = probe.encode(torch.tensor([row.prompt_ids + row.output]), logits="last")
            for i in range(params.canvas):
                token = int(logits[0].argmax())
                corrupt = (i + 3 * b + len(row.output)) % corrupt_every == corrupt_every - 1
                canvas[b, i] = (token + 1) % engine.vocab_size if corrupt else token
                logits = probe.encode(torch.tensor([[token]]), logits="last")
        return canvas, torch.full((batch.size,), params.steps)

    return draft


@pytest.mark.parametrize("corrupt_every", [4, 13, 1000])
def test_accepted_prefixes_keep_output_equal_to_ar(engine, monkeypatch, corrupt_every):
    requests = [chat(p, mode="verified", max_new_tokens=40, stop_token_ids=[], canvas=16) for p in PROMPTS[:4]]
    monkeypatch.setattr(engines.verified, "draft_canvas", oracle_drafter(engine, corrupt_every))
    with torch.inference_mode():
        results = engine.generate_batch(requests)  # rows accept different counts: ragged cache slots
    for request, result in zip(requests, results):
        ar = engine.generate(GenerationRequest(messages=request.messages, mode="ar", max_new_tokens=40, stop_token_ids=[]))
        assert result.token_ids == ar.token_ids
        assert result.stats.accepted > 0
        assert result.stats.encoder_calls < ar.stats.encoder_calls


def test_rejected_draft_slots_are_cropped_from_the_cache(engine):
    # Rejected draft tokens must leave the KV cache, or a long answer would fill it (and a
    # sliding-window layer) with canvases of garbage: the cache holds prompt + output only.
    import engines.batch

    seen = []
    original = engines.batch.SequenceBatch.keep_slots

    def spy(batch, length):
        original(batch, length)
        seen.append((batch.slots, batch.cache.get_seq_length()))

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(engines.batch.SequenceBatch, "keep_slots", spy)
    try:
        result = engine.generate(chat(PROMPTS[0], mode="verified", max_new_tokens=20, max_denoising_steps=2, stop_token_ids=[]))
    finally:
        monkeypatch.undo()
    assert seen, "verified mode never trimmed its cache"
    prompt = len(engine.prompt_ids(chat(PROMPTS[0])))
    slots, cached = seen[-1]
    assert slots == cached <= prompt + result.stats.output_tokens


def test_agreement_counts_the_prefix_ar_would_accept(engine):
    request = chat(PROMPTS[1], mode="ar", max_new_tokens=12, stop_token_ids=[])
    answer = engine.generate(request).token_ids
    assert engine.agreement(request, answer) == len(answer)  # AR's own answer: all accepted
    corrupted = answer[:5] + [(answer[5] + 1) % engine.vocab_size] + answer[6:]
    assert engine.agreement(request, corrupted) == 5
    assert engine.agreement(request, []) == 0
