"""An answer scored under the model's AR distribution (engines/decode/scoring.py), on the tiny random model:
the greedy answer is all accepted and is each position's most likely token; a changed token stops
the agreement there."""

from __future__ import annotations

import math

import pytest
import torch

from engines.decode.scoring import agreement, answer_logits, answer_logprobs
from tests.engines.factories import PROMPTS, chat


@pytest.fixture(scope="module")
def greedy(engine):
    """(prompt ids, AR mode's greedy answer ids) for one prompt."""
    request = chat(PROMPTS[2], mode="ar", max_new_tokens=10, stop_token_ids=[])
    return engine.prompt_ids(request), engine.generate(request).token_ids


def test_the_greedy_answer_is_accepted_whole_and_a_changed_token_stops_the_agreement(engine, greedy):
    prompt, answer = greedy
    assert agreement(engine.model, prompt, answer) == len(answer) == 10
    changed = answer[:4] + [(answer[4] + 1) % engine.vocab_size] + answer[5:]
    assert agreement(engine.model, prompt, changed) == 4
    assert agreement(engine.model, prompt, []) == 0


def test_an_answer_that_stopped_where_ar_goes_on_is_not_ar_s(engine, greedy):
    # Take one of AR's tokens (one not written before it) as a stop: an answer ending on any stop
    # where AR's choice is a stop is accepted whole, stop included; one that stopped a token sooner
    # is accepted only up to its stop (AR writes another token there), however right the rest.
    prompt, answer = greedy
    k = next(i for i in range(1, len(answer)) if answer[i] not in answer[:i])
    other_stop = next(t for t in range(engine.vocab_size) if t not in answer)
    stops = frozenset({answer[k], other_stop})
    assert agreement(engine.model, prompt, answer[:k] + [other_stop], stops) == k + 1
    assert agreement(engine.model, prompt, answer[: k - 1] + [other_stop], stops) == k - 1
    assert agreement(engine.model, prompt, answer[:k] + [other_stop]) == k  # no stop set: a token like any other


def test_answer_logits_are_the_ar_logits_before_each_answer_token(engine, greedy):
    prompt, answer = greedy
    logits = answer_logits(engine.model, prompt, answer)  # (A, V)
    assert logits.shape == (len(answer), engine.vocab_size)
    assert logits.argmax(-1).tolist() == answer  # greedy: each token is the argmax of the logits before it


def test_each_token_gets_its_logprob_and_the_most_likely_alternatives(engine, greedy):
    prompt, answer = greedy
    decode = engine.tokenizer.decode
    entries = answer_logprobs(engine.model, decode, prompt, answer, top=3)
    expected = torch.log_softmax(answer_logits(engine.model, prompt, answer).float(), dim=-1)
    assert [e["token"] for e in entries] == [decode([t]) for t in answer]
    for i, (entry, token) in enumerate(zip(entries, answer)):
        assert entry["logprob"] == pytest.approx(float(expected[i, token]), abs=1e-5) and entry["logprob"] <= 0
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert entry["top_logprobs"][0]["token"] == entry["token"] and math.isclose(tops[0], entry["logprob"], abs_tol=1e-6)
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
    assert all(e["top_logprobs"] == [] for e in answer_logprobs(engine.model, decode, prompt, answer, top=0))
    assert answer_logprobs(engine.model, decode, prompt, [], top=3) == []
