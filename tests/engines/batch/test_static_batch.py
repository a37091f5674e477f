"""A batch over a slot cache (engines.batch.static_batch) against the dynamic batch it stands in for
(engines.batch.sequence_batch, the reference): the same logits through prefill, merge, crop, row selection and a
canvas, a bucket outgrown, and either layout turned into the other."""

from __future__ import annotations

import pytest
import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.batch.static_cache import MIN_SLOTS, SlotCache
from engines.batch.static_batch import StaticSequenceBatch, as_dynamic, as_static, open_batch, use_slot_cache, uses_slot_cache

A, B = [3, 4, 5, 6, 7], [8, 9]
NEXT = torch.tensor([[11], [11]])


@pytest.fixture(scope="module")
def model(eager_model):
    return eager_model


pytestmark = pytest.mark.usefixtures("inference")  # tests/conftest.py: as the decode loops run


def prefilled(cls, model, rows=(A, B)):
    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + list(r) for r in rows])
    valid = torch.tensor([[False] * (width - len(r)) + [True] * len(r) for r in rows])
    batch = cls(model, len(rows), model.device)
    return batch, batch.encode(ids, valid)


def close(x, y) -> bool:
    return torch.allclose(x, y, atol=1e-4, rtol=1e-4)


def test_the_slot_layout_gives_the_dynamic_layouts_logits(model):
    (dynamic, d0), (static, s0) = prefilled(SequenceBatch, model), prefilled(StaticSequenceBatch, model)
    assert close(s0, d0) and static.slots == dynamic.slots == len(A)
    static.encode(torch.tensor([[20, 21], [22, 23]]), logits="none")
    dynamic.encode(torch.tensor([[20, 21], [22, 23]]), logits="none")
    static.keep_slots(len(A) + 1)
    dynamic.keep_slots(len(A) + 1)
    assert close(static.encode(NEXT), dynamic.encode(NEXT))
    canvas = torch.tensor([[12, 13, 14]] * 2)
    assert close(static.denoise(canvas, None), dynamic.denoise(canvas, None))
    static.select(torch.tensor([1]))
    dynamic.select(torch.tensor([1]))
    assert close(static.encode(NEXT[:1]), dynamic.encode(NEXT[:1]))


def test_merged_rows_match_and_a_bucket_outgrown_moves_the_cache(model):
    (static, _), (newcomer, _) = prefilled(StaticSequenceBatch, model, [A]), prefilled(SequenceBatch, model, [B])
    (dynamic, _), (dynamic_newcomer, _) = prefilled(SequenceBatch, model, [A]), prefilled(SequenceBatch, model, [B])
    static.merge(newcomer)  # a dynamic batch joins a static one
    dynamic.merge(dynamic_newcomer)
    assert close(static.encode(NEXT), dynamic.encode(NEXT))
    capacity = static.cache.capacity
    long = torch.tensor([[30] * capacity] * 2)
    assert close(static.encode(long), dynamic.encode(long)) and static.cache.capacity > capacity >= MIN_SLOTS


def test_either_layout_turns_into_the_other(model):
    (dynamic, _) = prefilled(SequenceBatch, model)
    static = as_static(dynamic)
    assert isinstance(static, StaticSequenceBatch) and as_static(static) is static
    back = SequenceBatch(model, 2, model.device)
    back.cache, back.mask = as_dynamic(static.cache, model), static.mask[:, : static.slots]
    assert isinstance(static.cache, SlotCache) and close(back.encode(NEXT), dynamic.encode(NEXT))


def test_a_models_setting_picks_the_layout_of_its_new_batches(tiny_checkpoint):
    from engines import DiffusionEngine

    model = DiffusionEngine.from_checkpoint(tiny_checkpoint).model  # its own: the setting stays on it
    assert not uses_slot_cache(model) and type(open_batch(model, 1)) is SequenceBatch
    use_slot_cache(model)
    assert uses_slot_cache(model) and isinstance(open_batch(model, 1), StaticSequenceBatch)
