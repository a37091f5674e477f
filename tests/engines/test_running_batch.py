"""One mode's running batch and the fairness rule between batches (engines/running_batch.py)."""

from __future__ import annotations

import torch

from engines.rows import Row
from engines.running_batch import Batch, pick
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
