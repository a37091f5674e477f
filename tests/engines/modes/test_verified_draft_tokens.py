"""Where a verified draft ends and which of its tokens are worth checking (engines.modes.verified_draft_tokens), read
from the draft's tokens and the rows' stop tokens alone."""

from __future__ import annotations

import torch

from engines.modes.verified_draft_tokens import REST_CHECKED, answer_span, draft_end, draft_rest
from engines.decode.rows import Row
from engines.decode.sampling import GREEDY_BELOW
from engines.types import GenerationRequest

STOP = 1


def row(temperature: float = 0.0) -> Row:
    return Row(GenerationRequest(prompt="x", temperature=temperature), [5, 6], frozenset({STOP}), None, str)


def test_the_rest_past_a_mismatch_runs_to_the_stop_token_and_at_most_rest_checked():
    draft = [10, 11, 12, 13, STOP, 14]
    assert draft_rest(row(), draft, accepted=1) == [12, 13, STOP]  # past the accepted token and the one that missed
    long = list(range(10, 10 + 3 * REST_CHECKED))
    assert draft_rest(row(), long, accepted=0) == long[1 : 1 + REST_CHECKED]
    assert draft_rest(row(temperature=2 * GREEDY_BELOW), draft, accepted=1) is None  # sampled rows check no rest


def test_the_span_verified_is_up_to_the_latest_stop_token_of_any_row():
    draft = torch.tensor([[10, STOP, 12, 13, 14, 15], [10, 11, 12, STOP, 14, 15]])
    assert answer_span([row(), row()], draft) == 4
    assert answer_span([row(), row()], torch.tensor([[10, STOP, 0, 0], [10, 11, 12, 13]])) == 4  # a row without one: all of it


def test_a_drafts_end_is_counted_past_what_the_round_wrote():
    draft = [10, 11, 12, 13, STOP]
    assert draft_end(row(), draft, accepted=1) == 2  # tokens 12 and 13 are left before the stop
    assert draft_end(row(), draft, accepted=4) is None  # the round reached it
    assert draft_end(row(), [10, 11, 12], accepted=0) is None
