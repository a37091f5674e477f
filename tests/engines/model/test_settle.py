"""A denoising step's work after its draws (engines.model.settle.settle), on the tiny model's
embeddings: the entropy-bound sampler keeps the surest positions and renoises the rest, rows that
have stopped are held as they were, and a row stops once its argmax canvas is stable and confident
(or its draft was abandoned)."""

from __future__ import annotations

import pytest
import torch

from engines.model.settle import settle

B, C = 2, 4
SAMPLED, NOISE = 1, 2  # what the sampler drew, what renoising writes


@pytest.fixture(scope="module")
def model(engine):
    return engine.model


def step(model, logits, *, done=(False, False), abandoned=(False, False), history=None, bound=0.5, threshold=0.5):
    hidden = model.model.decoder.embed_tokens.weight.shape[1]
    with torch.inference_mode():
        return settle(model, logits, torch.full((B, C), SAMPLED), torch.full((B, C), NOISE), torch.full((B, C), 7),
                      torch.full((B, C), 8), torch.zeros(B, C, hidden), torch.tensor(done), torch.tensor(abandoned),
                      history if history is not None else torch.empty(0, B, C, dtype=torch.long),
                      torch.tensor(bound), torch.tensor(threshold))


def vocab(model) -> int:
    return model.lm_head.weight.shape[0]


def sure(model, tokens: list[list[int]]) -> torch.Tensor:
    """Logits (B, C, V) all but certain of `tokens`."""
    logits = torch.zeros(B, C, vocab(model))
    for b, row in enumerate(tokens):
        for c, t in enumerate(row):
            logits[b, c, t] = 60.0
    return logits


def test_the_surest_positions_are_kept_within_the_bound_and_the_rest_renoised(model):
    logits = torch.zeros(B, C, vocab(model))  # uniform: entropy log V everywhere ...
    logits[:, 2, 5] = 60.0  # ... but position 2, which is sure of token 5
    argmax, current, conditioning, done, _ = step(model, logits)
    # sorted by entropy, a position is kept while the entropy before it is within the bound: the sure one and one more
    assert (current == SAMPLED).sum(-1).tolist() == [2, 2] and current[:, 2].tolist() == [SAMPLED, SAMPLED]
    assert set(current.flatten().tolist()) == {SAMPLED, NOISE}
    assert argmax[:, 2].tolist() == [5, 5] and conditioning.shape == (B, C, model.model.decoder.embed_tokens.weight.shape[1])
    assert not done.any()  # uniform positions: far from confident


def test_a_row_that_has_stopped_is_held_as_it_was(model):
    argmax, current, conditioning, done, _ = step(model, sure(model, [[3] * C, [4] * C]), done=(True, False))
    assert argmax[0].tolist() == [8] * C and current[0].tolist() == [7] * C and not conditioning[0].any()
    assert argmax[1].tolist() == [4] * C and done.tolist() == [True, True]  # the other row, sure and with no history, stops


def test_a_row_stops_once_its_argmax_is_stable_and_confident_or_its_draft_was_abandoned(model):
    tokens = [[3, 4, 5, 6], [3, 4, 5, 6]]
    history = torch.tensor([tokens, [[3, 4, 5, 6], [9, 9, 9, 9]]])  # (K=2, B, C): row 1 changed a step ago
    argmax, _, _, done, after = step(model, sure(model, tokens), history=history)
    assert done.tolist() == [True, False] and torch.equal(after[-1], argmax) and torch.equal(after[0], history[1])
    _, _, _, unsure, _ = step(model, torch.zeros(B, C, vocab(model)), abandoned=(False, True))
    assert unsure.tolist() == [False, True]
