"""Prompt lookup in AR steps: the same tokens as plain AR, fewer model calls where answers repeat."""

from __future__ import annotations

import dataclasses
import math

import pytest

from engines.modes.ar_lookup import Lookup, guess_width, pass_cost
from engines.decode.rows import Row
from engines.types import GenerationRequest
from tests.engines.factories import PROMPTS, chat
from tests.engines.grammar.helpers import ASK, schema_spec


def decode(engine, monkeypatch, requests, lookup: bool):
    monkeypatch.setattr(engine, "lookup", lookup)
    return engine.generate_batch(requests)


def row(prompt: list[int], output: list[int] = (), temperature: float = 0.0) -> Row:
    return Row(GenerationRequest(prompt="x", temperature=temperature, max_new_tokens=512), list(prompt), frozenset(), None, str,
               output=list(output))


@pytest.mark.parametrize("mode", ["ar", "verified"])
@pytest.mark.parametrize("max_new_tokens", [1, 7, 60, 200])
def test_lookup_keeps_greedy_output_equal_to_plain_ar(engine, monkeypatch, mode, max_new_tokens):
    """Every prompt alone and all of them as one batch (rows that guess beside rows that do not,
    rows leaving mid-guess at max_new_tokens or a stop token)."""
    requests = [chat(p, mode=mode, max_new_tokens=max_new_tokens) for p in PROMPTS]
    plain = decode(engine, monkeypatch, [chat(p, mode="ar", max_new_tokens=max_new_tokens) for p in PROMPTS], lookup=False)
    batched = decode(engine, monkeypatch, requests, lookup=True)
    alone = [decode(engine, monkeypatch, [r], lookup=True)[0] for r in requests]
    for p, b, a in zip(plain, batched, alone):
        assert b.token_ids == a.token_ids == p.token_ids
        assert b.finish_reason == p.finish_reason and b.text == p.text


def loop_start(ids: list[int], longest_period: int = 40) -> tuple[int, int]:
    """(start, period) of the answer's final loop: the earliest `start` from which `ids` repeats
    with some period up to `longest_period`."""
    for start in range(len(ids)):
        for period in range(1, longest_period + 1):
            if all(ids[i] == ids[i - period] for i in range(start + period, len(ids))):
                return start, period
    raise AssertionError("the answer never loops")


def test_a_looping_answer_is_written_in_far_fewer_calls(engine, monkeypatch):
    """The random model loops ("d d d ..."): its guesses are the loop, and AR agrees. Each model call
    writes AR's token plus the guesses it accepted, so calls + guessed tokens = the answer's length;
    and once the loop has gone round once, each pass can guess the rest of it: the remaining tokens
    take at most one pass per guess width while the odds build up (WIDTHS), then one per widest
    guess plus AR's token (MOST_GUESSED + 1)."""
    from engines.modes.ar_lookup import MOST_GUESSED, WIDTHS

    n = 200
    request = chat(PROMPTS[0], mode="ar", max_new_tokens=n, stop_token_ids=[])
    plain, = decode(engine, monkeypatch, [request], lookup=False)
    guessed, = decode(engine, monkeypatch, [request], lookup=True)
    assert guessed.token_ids == plain.token_ids and len(plain.token_ids) == n
    assert plain.stats.encoder_calls == n and plain.stats.looked_up == 0
    assert guessed.stats.encoder_calls == n - guessed.stats.looked_up  # every saved call is a token guessed right
    start, period = loop_start(plain.token_ids)
    head = start + period  # the loop seen once
    assert n - head > 2 * (MOST_GUESSED + 1), f"the answer loops only from token {start}: too late to show anything"
    until_loop, = decode(engine, monkeypatch, [dataclasses.replace(request, max_new_tokens=head)], lookup=True)
    assert until_loop.token_ids == plain.token_ids[:head]
    tail_calls = guessed.stats.encoder_calls - until_loop.stats.encoder_calls
    assert tail_calls <= len(WIDTHS) + math.ceil((n - head) / (MOST_GUESSED + 1)), (start, period, tail_calls)


def test_sampled_and_constrained_rows_never_guess(engine, monkeypatch):
    """A sampled token is not the argmax the check compares; a grammar chooses under its mask.
    Both decode as without lookup (same seed, same tokens), beside a greedy row that does guess."""
    spec = schema_spec({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    requests = [
        chat(PROMPTS[0], mode="ar", max_new_tokens=80, temperature=1.0, seed=4, stop_token_ids=[]),
        GenerationRequest(messages=ASK, mode="ar", grammar=spec.grammar, max_new_tokens=48, seed=1),
        chat(PROMPTS[0], mode="ar", max_new_tokens=80, stop_token_ids=[]),
    ]
    plain = decode(engine, monkeypatch, requests, lookup=False)
    guessed = decode(engine, monkeypatch, requests, lookup=True)
    assert [r.token_ids for r in guessed] == [r.token_ids for r in plain]
    assert guessed[0].stats.looked_up == guessed[1].stats.looked_up == 0
    assert guessed[2].stats.looked_up > 0


def test_a_stop_string_inside_an_accepted_guess_ends_the_answer_there(engine, monkeypatch):
    plain, = decode(engine, monkeypatch, [chat(PROMPTS[0], mode="ar", max_new_tokens=120, stop_token_ids=[])], lookup=False)
    stop = plain.text[len(plain.text) // 2 :][:5]  # a piece of the loop, well inside the answer
    request = chat(PROMPTS[0], mode="ar", max_new_tokens=120, stop_token_ids=[], stop=[stop])
    cut, = decode(engine, monkeypatch, [request], lookup=False)
    guessed, = decode(engine, monkeypatch, [request], lookup=True)
    assert guessed.text == cut.text == plain.text[: plain.text.find(stop)]
    assert guessed.finish_reason == cut.finish_reason == "stop"


def test_verified_stats_split_drafts_ar_steps_and_guesses(engine, monkeypatch):
    result, = decode(engine, monkeypatch, [chat(PROMPTS[5], mode="verified", max_new_tokens=150, stop_token_ids=[])], lookup=True)
    s = result.stats
    assert s.accepted + s.ar_tokens + s.looked_up == s.output_tokens == 150
    assert s.looked_up > 0


def test_guesses_are_as_wide_as_they_pay_at_the_batch_size():
    sure, doubtful = Lookup(hits=50.0, misses=1.0), Lookup(hits=0.1, misses=5.0)
    looping, plain = row([1]), row([1])
    looping.lookup, plain.lookup = sure, doubtful
    guess = list(range(32))
    assert guess_width([looping], [guess]) >= 16  # alone, a sure guess goes wide
    assert guess_width([plain], [guess]) == 0  # a doubtful one is a plain AR step
    assert guess_width([plain], [[]]) == 0
    # Among 7 rows that do not guess, a wide pass slows all of them: the sure row guesses narrower.
    crowd = [looping] + [row([1]) for _ in range(7)]
    assert 0 < guess_width(crowd, [guess] + [[]] * 7) < guess_width([looping], [guess])
    assert pass_cost(1, 8) == 1.0 and pass_cost(33, 8) > pass_cost(33, 1) > pass_cost(9, 1)
