"""Verified mode's two batches (engines/modes/verified_batches.py): rows move between the drafting and the
stepping batch with their cache rows, and `regroup` puts each row where its plan asks, on the tiny
random model's real KV cache."""

from __future__ import annotations

import pytest
import torch

from engines.decode.canvas_settings import BlockParams, context_length
from engines.modes.verified_drafting import DraftControl, DraftCosts
from engines.batch.prefill import prefill
from engines.modes.verified_batches import Rows, regroup
from tests.engines.factories import PROMPTS, chat


pytestmark = pytest.mark.usefixtures("inference")  # tests/conftest.py: as the decode loops run


PARAMS = BlockParams(canvas=32, steps=4, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005, entropy_bound=0.1)


def batch_of(engine, prompts: list[str]) -> Rows:
    rows = []
    for text in prompts:
        request = chat(text, mode="verified", max_new_tokens=16)
        rows.append(engine.row(request, engine.prompt_ids(request)))
    batch, _ = prefill(engine.model, rows, engine.pad_id, logits="none")
    return Rows(batch, rows, torch.arange(len(rows)))


def test_taken_rows_move_with_their_cache_rows_and_join_another_batch(engine):
    rows = batch_of(engine, PROMPTS[:3])
    first, second, third = rows.live
    lengths = rows.batch.lengths().tolist()  # each row's prompt tokens in the cache
    taken = rows.take([1])
    assert taken.live == [second] and taken.predicted.tolist() == [1] and taken.batch.lengths().tolist() == [lengths[1]]
    assert rows.live == [first, third] and rows.predicted.tolist() == [0, 2] and rows.batch.lengths().tolist() == [lengths[0], lengths[2]]
    rows.join(taken)
    assert rows.live == [first, third, second] and rows.predicted.tolist() == [0, 2, 1]
    assert rows.batch.lengths().tolist() == [lengths[0], lengths[2], lengths[1]]
    everything = rows.take([0, 1, 2])
    assert rows.live == [] and len(everything.live) == 3  # all taken: the cache goes with them
    empty = Rows(everything.batch, [], everything.predicted[:0])
    empty.join(everything)
    assert empty.live == everything.live


def test_regroup_sends_a_row_without_credit_to_ar_steps_and_one_without_room_out_of_the_round(engine):
    drafting = batch_of(engine, PROMPTS[:3])
    stepping = Rows(drafting.batch, [], drafting.predicted[:0])
    rich, broke, cramped = drafting.live
    context = context_length(engine.model)
    for row in drafting.live:
        row.draft = DraftControl.start(PARAMS, largest=32)
        row.draft.first, row.draft.credit = False, 100.0  # no first-draft grant: rows draft on credit
    broke.draft.credit = 0.0
    cramped.output = [0] * (context - len(cramped.prompt_ids) - 4)  # 4 positions left: a smaller draft at most
    round_params = regroup(drafting, stepping, PARAMS, DraftCosts(), context)
    assert drafting.live == [rich] and set(map(id, stepping.live)) == {id(broke), id(cramped)}
    assert round_params.canvas == rich.draft.canvas and round_params.steps >= 2
    rich.draft.credit = 0.0  # now the cramped row's is the only plan: it drafts what fits
    assert regroup(drafting, stepping, PARAMS, DraftCosts(), context).canvas == 4 and drafting.live == [cramped]
    cramped.draft.credit = 0.0
    assert regroup(drafting, stepping, PARAMS, DraftCosts(), context) is None and drafting.live == [] and len(stepping.live) == 3
