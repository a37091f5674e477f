"""One row's prompt-lookup state (engines.decode.prompt_lookup.Lookup): a guess copies what followed the latest
earlier occurrence of the sequence's tail, runs on through a loop, and its odds follow the evidence."""

from __future__ import annotations

import pytest

from engines.decode.prompt_lookup import Lookup
from engines.decode.rows import Row
from engines.types import GenerationRequest


def row(prompt: list[int], output: list[int] = ()) -> Row:
    return Row(GenerationRequest(prompt="x", max_new_tokens=512), list(prompt), frozenset(), None, str, output=list(output))


def test_a_guess_repeats_a_loop_as_long_as_it_is_asked():
    lookup = Lookup()
    assert lookup.guess(row([1, 2, 3, 4]), 8) == []  # the tail never occurred before
    looping = row([9, 8], [5, 6, 7, 5, 6, 7, 5, 6])
    assert lookup.guess(looping, 8) == [7, 5, 6, 7, 5, 6, 7, 5]
    copying = row([10, 11, 12, 13, 14, 15, 16], [11, 12])  # the answer quotes its prompt
    assert Lookup().guess(copying, 3) == [13, 14, 15]
    assert Lookup().guess(copying, 0) == []


def test_the_latest_occurrence_is_guessed_and_the_index_grows_with_the_answer():
    lookup = Lookup()
    r = row([1, 2, 3, 4, 1, 2])
    assert lookup.guess(r, 2) == [3, 4]  # after [1, 2]: only the first occurrence is earlier than the tail
    r.output += [5, 6, 1, 2]
    assert lookup.guess(r, 2) == [5, 6]  # now the latest earlier [1, 2] is followed by 5


def test_odds_follow_the_evidence_and_old_evidence_decays():
    lookup = Lookup()
    assert lookup.odds == pytest.approx(0.5)
    for _ in range(20):
        lookup.observe(8, 8)
    assert lookup.odds > 0.95 and lookup.expected(8) > 6
    for _ in range(60):  # a miss is one piece of evidence, a hit one per token: it takes more of them
        lookup.observe(4, 0)
    assert lookup.odds < 0.1 and lookup.expected(8) < 0.1


def test_expected_tokens_sum_the_odds_of_each_guessed_token():
    lookup = Lookup(hits=3.0, misses=1.0)  # odds 0.75
    assert lookup.expected(3) == pytest.approx(0.75 + 0.75**2 + 0.75**3)
    assert Lookup(hits=1.0, misses=0.0).expected(5) == 5.0  # a sure guess writes every token
