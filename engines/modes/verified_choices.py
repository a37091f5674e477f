"""AR's choice after each token of a draft, in one commit pass: what verified mode accepts a
draft's prefix by. Rows without a grammar choose at every position at once; a row with one walks
the draft with its matcher, position by position, as far as the draft agrees."""

from __future__ import annotations

import torch

from engines.modes.ar import choose, next_tokens
from engines.decode.rows import Row


def ar_choices(live: list[Row], draft: torch.Tensor, logits: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """The AR choice after each draft token (B, C), from commit logits (B, C, V) and each row's
    choice for the draft's first position (B,). Rows without a
    grammar choose at every position at once; a constrained row's choice at position i depends on
    the grammar state after d_1..d_i, so it walks the draft only as far as it agrees."""
    free = [j for j, r in enumerate(live) if r.constraint is None]
    out = torch.full(draft.shape, -1, dtype=torch.long, device=draft.device)  # -1 never equals a draft token
    if free:
        out[free] = next_tokens([live[j] for j in free], logits[free])
    for j, row in enumerate(live):
        if row.constraint is not None:
            choices = constrained_choices(row, draft[j].tolist(), logits[j], int(predicted[j]))
            out[j, : len(choices)] = torch.tensor(choices, dtype=torch.long, device=draft.device)
    return out


def constrained_choices(row: Row, draft: list[int], logits: torch.Tensor, first: int) -> list[int]:
    """AR choices after draft tokens d_1..d_k for the longest agreeing prefix, under the row's
    grammar; position 1's choice (`first`) was taken the round before, under the same state.
    The matcher looks ahead over the agreeing draft tokens and rolls back: `Row.extend` advances
    it for real when the tokens are committed."""
    constraint, choices, ahead = row.constraint, [], 0
    expected = first  # the AR choice the draft token at i must equal
    for i, token in enumerate(draft):
        if token != expected:
            break
        if token in row.stop_ids or not constraint.consume(token):
            break
        ahead += 1
        if constraint.done:  # complete after d_i: the answer ends there
            choices.append(min(row.stop_ids))
            break
        expected = int(choose(row, logits[i : i + 1], ahead=ahead)[0])
        choices.append(expected)
    constraint.rollback(ahead)
    return choices
