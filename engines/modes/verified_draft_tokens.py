"""Where a verified-mode draft ends and which of its tokens are worth checking: read from the draft's
tokens and the row's stop tokens alone (no model call)."""

from __future__ import annotations

import torch

from engines.decode.rows import Row
from engines.decode.sampling import GREEDY_BELOW

REST_CHECKED = 16  # draft tokens past a mismatch checked in the AR token's pass: a wider pass costs more where the rest misses


def draft_rest(row: Row, draft: list[int], accepted: int) -> list[int] | None:
    """The draft past its first mismatch, up to its stop token: after one token stood in for another
    the rest is often AR's answer still. None where choices take a pass per token (a grammar) or sample."""
    if row.constraint is not None or row.request.temperature >= GREEDY_BELOW:
        return None
    end = next((i for i, token in enumerate(draft) if token in row.stop_ids), len(draft) - 1)
    return draft[accepted + 1 : min(end + 1, accepted + 1 + REST_CHECKED)]


def answer_span(live: list[Row], draft: torch.Tensor) -> int:
    """Draft positions worth verifying (B, C) -> n: up to and including each row's first stop
    token (the whole canvas for a row without one). A row ends at its stop token, so the AR
    choices after it are never used: a 16-token answer drafted on 32 positions verifies 17."""
    span = 0
    for row, tokens in zip(live, draft.tolist()):
        end = next((i for i, token in enumerate(tokens) if token in row.stop_ids), None)
        span = max(span, len(tokens) if end is None else end + 1)
        if span == len(tokens):
            break
    return span


def draft_end(row: Row, draft: list[int], accepted: int) -> int | None:
    """Tokens a draft had before its first stop token past the `accepted` + 1 the round wrote
    (None: it has no stop token there): how soon the drafter expects the answer to end."""
    end = next((i for i, token in enumerate(draft) if token in row.stop_ids), None)
    return end - accepted - 1 if end is not None and end > accepted else None
