"""A batch of sequences sharing one KV cache (engines.batch.sequence_batch.SequenceBatch), on the tiny random model:
a row's logits are the same alone, left-padded beside a longer row, after rows merge, after rejected
slots are cropped, and after the batch keeps or copies some of its rows (RoPE: positions count per row)."""

from __future__ import annotations

import pytest
import torch

from engines.batch.sequence_batch import SequenceBatch

A, B = [3, 4, 5, 6, 7], [8, 9]
NEXT = [[11], [11]]


@pytest.fixture(scope="module")
def model(eager_model):
    return eager_model


pytestmark = pytest.mark.usefixtures("inference")  # tests/conftest.py: as the decode loops run


def batch_of(model, *rows: list[int]) -> tuple[SequenceBatch, torch.Tensor]:
    """A batch of `rows`, left-padded, and its prefill's last logits (B, V)."""
    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    valid = torch.tensor([[False] * (width - len(r)) + [True] * len(r) for r in rows])
    batch = SequenceBatch(model, len(rows), model.device)
    return batch, batch.encode(ids, valid)


def close(x: torch.Tensor, y: torch.Tensor) -> bool:
    return torch.allclose(x, y, atol=1e-4, rtol=1e-4)


def test_a_row_gets_its_logits_alone_or_left_padded_beside_a_longer_one(model):
    (_, a), (_, b), (both, ab) = batch_of(model, A), batch_of(model, B), batch_of(model, A, B)
    assert ab.shape == (2, a.shape[-1]) and close(ab[0], a[0]) and close(ab[1], b[0])
    assert both.lengths().tolist() == [len(A), len(B)] and both.encoder_calls == 1


def test_rows_that_join_a_running_batch_keep_their_own_positions(model):
    (alone_a, _), (alone_b, _) = batch_of(model, A), batch_of(model, B)
    (merged, _), (newcomer, _) = batch_of(model, A), batch_of(model, B)
    merged.merge(newcomer)
    out = merged.encode(torch.tensor(NEXT))
    assert close(out[0], alone_a.encode(torch.tensor(NEXT[:1]))[0]) and close(out[1], alone_b.encode(torch.tensor(NEXT[:1]))[0])


def test_cropped_slots_are_forgotten(model):
    drafted, _ = batch_of(model, A)
    drafted.encode(torch.tensor([[20, 21, 22]]), logits="none")  # a draft the check rejected
    drafted.keep_slots(len(A))
    fresh, _ = batch_of(model, A)
    assert drafted.slots == len(A) and close(drafted.encode(torch.tensor(NEXT[:1])), fresh.encode(torch.tensor(NEXT[:1])))


def test_copied_rows_leave_the_batch_unchanged_and_selected_rows_decode_on_alone(model):
    (pair, _), (alone_b, _) = batch_of(model, A, B), batch_of(model, B)
    expected = alone_b.encode(torch.tensor(NEXT[:1]))[0]
    part = pair.copy_rows([1])
    assert close(part.encode(torch.tensor(NEXT[:1]))[0], expected) and pair.size == 2 and pair.slots == len(A)
    pair.select(torch.tensor([1]))
    assert pair.size == 1 and close(pair.encode(torch.tensor(NEXT[:1]))[0], expected)


def test_a_canvas_is_denoised_after_each_rows_tokens(model):
    (alone, _), (pair, _) = batch_of(model, B), batch_of(model, A, B)
    canvas = torch.tensor([[12, 13, 14, 15]] * 2)
    together, by_itself = pair.denoise(canvas, None), alone.denoise(canvas[:1], None)
    assert together.shape == (2, 4, by_itself.shape[-1]) and close(together[1], by_itself[0])
    assert pair.slots == len(A) and pair.decoder_calls == 1  # the canvas reads the cache, it does not grow it
