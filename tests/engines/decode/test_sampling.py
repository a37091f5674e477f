"""Token choice on per-request generators (engines.decode.sampling): the same seed draws the same tokens alone
or in a batch, near-zero temperatures are greedy, the temperature schedule runs t_max -> t_min, the
entropy-bound sampler accepts the surest positions within its bound, and the stop rule waits for a
stable, confident canvas."""

from __future__ import annotations

import pytest
import torch

from engines.decode.sampling import (
    GREEDY_BELOW,
    RowSeededEntropyBoundSampler,
    StableAndConfident,
    active_rows,
    choose_tokens,
    make_generator,
    schedule_temperature,
)

V = 50


def logits_of(seed: int, shape=(4, V)) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_a_seed_draws_the_same_tokens_every_time():
    logits = logits_of(0)
    draw = lambda seed: choose_tokens(logits, 1.0, 1.0, 0, make_generator(seed))  # noqa: E731
    assert torch.equal(draw(7), draw(7))
    assert any(not torch.equal(draw(7), draw(s)) for s in range(8, 12))


def test_greedy_below_the_threshold_and_top_k_1_is_greedy():
    logits = logits_of(1)
    argmax = logits.argmax(-1)
    assert torch.equal(choose_tokens(logits, GREEDY_BELOW / 2, 1.0, 0, make_generator(0)), argmax)  # no overflow to nan
    assert torch.equal(choose_tokens(logits, 1.5, 1.0, 1, make_generator(0)), argmax)
    assert torch.equal(choose_tokens(logits, 1.5, 1e-6, 0, make_generator(0)), argmax)  # a vanishing nucleus


def test_the_temperature_falls_linearly_from_t_max_to_t_min():
    assert [schedule_temperature(0.2, 1.0, 4, r) for r in (4, 2, 0)] == pytest.approx([1.0, 0.6, 0.2])


def test_canvas_noise_comes_from_each_rows_generator_and_stopped_rows_draw_nothing():
    def sampler(seeds):
        return RowSeededEntropyBoundSampler(0.5, canvas_length=6, vocab_size=V, generators=[make_generator(s) for s in seeds])

    alone = sampler([5]).initialize_canvas(1, torch.device("cpu"))
    pair = sampler([9, 5])
    pair.active = [False, True]
    canvas = pair.initialize_canvas(2, torch.device("cpu"))
    assert torch.equal(canvas[1], alone[0]) and not canvas[0].any() and active_rows(pair.active) == [1]


def test_a_greedy_sampler_takes_the_argmax_and_accepts_the_surest_positions_within_the_bound():
    s = RowSeededEntropyBoundSampler(1.0, canvas_length=4, vocab_size=V, generators=[make_generator(0)], greedy=True)
    logits = logits_of(2, (1, 4, V))
    assert torch.equal(s.sample(logits), logits.argmax(-1))
    entropy = torch.tensor([[0.9, 0.1, 0.5, 2.0]])
    kept = s.accept_by_entropy(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.long), entropy)
    # sorted 0.1, 0.5, 0.9, 2.0: each accepted while the entropy before it is within 1.0 (0, 0.1, 0.6; not 1.5)
    assert kept.tolist() == [[1, 1, 1, 0]]


def test_a_canvas_stops_once_stable_for_the_threshold_and_confident():
    rule = StableAndConfident(stability_threshold=2, confidence_threshold=0.5)
    canvas, sure = torch.tensor([[1, 2, 3]]), torch.tensor([0.1])
    assert [bool(rule(canvas, sure)) for _ in range(3)] == [False, False, True]  # the same argmax two steps before
    assert not bool(rule(canvas, torch.tensor([0.9])))  # stable but unsure
    assert not bool(rule(torch.tensor([[1, 2, 4]]), sure))  # changed
