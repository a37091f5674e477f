"""One lane's running batch, its typed key and which requests it takes, and the fairness rule between batches (engines/replica/lanes.py)."""

from __future__ import annotations

from dataclasses import replace

import torch

from engines.decode.rows import Row
from engines.replica.lanes import Batch, BatchKey, lane, pick
from tests.engines.factories import chat


def row() -> Row:
    return Row(request=chat("Hi"), prompt_ids=[1, 2], stop_ids=frozenset([0]), generator=torch.Generator(), decode=str)


def test_a_batch_counts_as_running_only_the_rows_still_decoding():
    done, failed, going = row(), row(), row()
    done.finish_reason = "stop"
    failed.error = RuntimeError("decode failed")
    assert Batch(BatchKey("ar", None), [done, failed, going]).running() == 1


def test_the_batch_that_used_the_least_decode_time_steps_next_and_ties_go_to_the_first_started():
    block, ar, verified = Batch(BatchKey("block", None), [], used_s=0.30), Batch(BatchKey("ar", None), [], used_s=0.05), Batch(BatchKey("verified", None), [], used_s=0.05)
    assert pick([block, ar, verified]) is ar
    ar.used_s += 0.5  # after a long AR step the others catch up
    assert pick([block, ar, verified]) is verified


def test_ar_requests_ride_in_verified_batches_that_draft_and_nowhere_else():
    from engines.decode.canvas_settings import BlockParams

    drafting = BlockParams(canvas=256, steps=12, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005, entropy_bound=0.1)
    seeded = replace(drafting, seeded=True)
    assert BatchKey("ar", None).lane == "tokens"
    assert (lane("block"), lane("verified"), lane("ar")) == ("canvas", "tokens", "tokens")
    assert BatchKey("verified", drafting).takes(BatchKey("ar", None))
    assert not BatchKey("verified", seeded).takes(BatchKey("ar", None)), "a skeleton-seeded round has no draft for a row without a skeleton"
    assert not BatchKey("block", drafting).takes(BatchKey("ar", None))
    assert BatchKey("verified", drafting).takes(BatchKey("verified", drafting))
    assert not BatchKey("verified", drafting).takes(BatchKey("verified", replace(drafting, t_min=0.1))), "other settings wait for their own batch"
    assert not BatchKey("ar", None).takes(BatchKey("verified", drafting)) and BatchKey("ar", None).takes(BatchKey("ar", None))
