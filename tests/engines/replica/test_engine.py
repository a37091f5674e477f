"""A request decodes to the same tokens alone or in a batch with prompts of other lengths."""

import pytest

from tests.engines.factories import PROMPTS, chat


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_batched_equals_one_by_one(engine, mode, drafts_anywhere):
    steps = 2 if mode == "verified" else 6  # verified on a random model is one token per round: keep it short
    requests = [
        chat(p, mode=mode, seed=i, max_new_tokens=n, max_denoising_steps=steps, stop_token_ids=[] if i % 2 else None)
        for i, (p, n) in enumerate(zip(PROMPTS[:5], [5, 40, 17, 70, 33]))
    ]
    batched = engine.generate_batch(requests)
    for request, together in zip(requests, batched):
        alone = engine.generate(request)
        assert together.token_ids == alone.token_ids, request.messages
        assert together.finish_reason == alone.finish_reason
        # Verified prices its drafts, and AR steps their prompt-lookup guesses, at the batch size they
        # run at: the calls differ, not the tokens.
        if mode == "block":
            assert together.stats.decoder_calls == alone.stats.decoder_calls
            assert together.stats.encoder_calls == alone.stats.encoder_calls


def test_mixed_modes_in_one_call_keep_order(engine):
    requests = [chat(PROMPTS[0], mode=m, seed=1, max_new_tokens=8, max_denoising_steps=2) for m in ("block", "ar", "verified", "ar")]
    results = engine.generate_batch(requests)
    assert [r.mode for r in results] == ["block", "ar", "verified", "ar"]
    assert [r.request_id for r in results] == [r.request_id for r in requests]
    assert results[1].token_ids == results[3].token_ids == results[2].token_ids  # greedy AR == verified


def test_rows_with_different_canvas_sizes_batch_separately(engine, drafts_anywhere):
    requests = [chat(PROMPTS[1], mode="block", seed=0, canvas=c, max_new_tokens=24, stop_token_ids=[]) for c in (8, 16)]
    small, large = engine.generate_batch(requests)
    assert len(small.stats.steps_per_canvas) == 3 and len(large.stats.steps_per_canvas) == 2
    assert small.token_ids == engine.generate(requests[0]).token_ids
