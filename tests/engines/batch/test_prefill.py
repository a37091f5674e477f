"""A batch's first encoder pass (engines.batch.prefill), on the tiny random model: rows left-padded together,
rows with a conversation head encoded on top of what the prefix cache holds, and the logits in the
rows' order whichever way each row was encoded."""

from __future__ import annotations

import pytest
import torch

from engines.batch.prefill import left_pad, prefill
from engines.batch.prefix_cache import PrefixCache
from engines.decode.rows import Row
from engines.types import GenerationRequest

PAD = 0
HEAD = [3, 4, 5, 6, 7, 8]  # a system prompt every conversation starts with


@pytest.fixture(scope="module")
def model(eager_model):
    return eager_model


pytestmark = pytest.mark.usefixtures("inference")  # tests/conftest.py: as the decode loops run


def row(prompt: list[int], output: list[int] = (), cache: PrefixCache | None = None) -> Row:
    r = Row(GenerationRequest(prompt="x"), list(prompt), frozenset(), None, str, output=list(output))
    if cache is not None:
        r.prefix_cache, r.prefix_bounds = cache, (len(HEAD),)
    return r


def close(x, y) -> bool:
    return torch.allclose(x, y, atol=1e-4, rtol=1e-4)


def test_left_padding_marks_the_real_tokens():
    ids, valid = left_pad([[5, 6, 7], [8], []], PAD, torch.device("cpu"))
    assert ids.tolist() == [[5, 6, 7], [PAD, PAD, 8], [PAD, PAD, PAD]]
    assert valid.tolist() == [[True] * 3, [False, False, True], [False] * 3]


def test_rows_prefilled_together_get_their_logits_alone_and_written_tokens_count(model):
    rows = [row([3, 4, 5, 6], output=[9]), row([7, 8])]
    batch, logits = prefill(model, rows, PAD, "last")
    alone = [prefill(model, [row(r.prompt_ids, r.output)], PAD, "last")[1][0] for r in rows]
    assert close(logits[0], alone[0]) and close(logits[1], alone[1])
    assert batch.lengths().tolist() == [5, 2] and [r.stats.encoder_calls for r in rows] == [1, 1]


def test_a_head_in_the_prefix_cache_is_reused_and_gives_the_cold_logits_in_the_rows_order(model):
    cache = PrefixCache()
    cold_row = row(HEAD + [9, 10], cache=cache)
    _, cold = prefill(model, [cold_row], PAD, "last")
    assert cold_row.stats.prefix_tokens_reused == 0 and cache.get(tuple(HEAD)) is not None  # the head was stored
    plain, warm_row = row([12, 13]), row(HEAD + [9, 10], cache=cache)
    batch, logits = prefill(model, [warm_row, plain], PAD, "last")  # the cached row is encoded apart, then put back first
    assert warm_row.stats.prefix_tokens_reused == len(HEAD)
    assert close(logits[0], cold[0]) and close(logits[1], prefill(model, [row([12, 13])], PAD, "last")[1][0])
    assert batch.lengths().tolist() == [len(HEAD) + 2, 2]
