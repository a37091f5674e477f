"""One lane's running batch, which requests it takes, and the fairness rule between batches (engines/replica/lanes.py)."""

from __future__ import annotations

from dataclasses import replace

import torch

from engines.decode.rows import Row
from engines.replica.lanes import Batch, fits, lane, pick
from tests.engines.factories import chat


def row() -> Row:
    return Row(request=chat("Hi"), prompt_ids=[1, 2], stop_ids=frozenset([0]), generator=torch.Generator(), decode=str)


def test_a_batch_counts_as_running_only_the_rows_still_decoding():
    done, failed, going = row(), row(), row()
    done.finish_reason = "stop"
    failed.error = RuntimeError("decode failed")
    assert Batch(("ar", None), [done, failed, going]).running() == 1


def test_the_batch_that_used_the_least_decode_time_steps_next_and_ties_go_to_the_first_started():
    block, ar, verified = Batch(("block", None), [], used_s=0.30), Batch(("ar", None), [], used_s=0.05), Batch(("verified", None), [], used_s=0.05)
    assert pick([block, ar, verified]) is ar
    ar.used_s += 0.5  # after a long AR step the others catch up
    assert pick([block, ar, verified]) is verified


def test_ar_requests_ride_in_verified_batches_that_draft_and_nowhere_else():
    from engines.decode.canvas_settings import BlockParams

    drafting = BlockParams(canvas=256, steps=12, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005, entropy_bound=0.1)
    seeded = replace(drafting, seeded=True)
    assert (lane("block"), lane("verified"), lane("ar")) == ("canvas", "tokens", "tokens")
    assert fits(("verified", drafting), ("ar", None))
    assert not fits(("verified", seeded), ("ar", None)), "a skeleton-seeded round has no draft for a row without a skeleton"
    assert not fits(("block", drafting), ("ar", None))
    assert fits(("verified", drafting), ("verified", drafting))
    assert not fits(("verified", drafting), ("verified", replace(drafting, t_min=0.1))), "other settings wait for their own batch"
    assert not fits(("ar", None), ("verified", drafting)) and fits(("ar", None), ("ar", None))
