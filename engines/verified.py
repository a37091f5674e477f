"""Verified mode: diffusion drafts, checked token by token against the model's own AR choice.

A round, for context x_1..x_n whose last encoder pass predicted `next` for position n+1:
1. draft a canvas d_1..d_C in block mode;
2. commit pass: the encoder over the draft yields the AR choice a_i after every d_i;
3. accept the longest prefix with d_1 == next and d_i == a_{i-1}; append the AR token at
   the first mismatch (or a_C as a bonus when all match); drop the rest of the draft;
4. encode that one AR token, which predicts `next` for the following round.
Every output token is the AR choice given the tokens before it, so under greedy decoding the
output equals AR mode token for token; with sampling it is distributed exactly as AR sampling.
A row with a grammar takes its AR choices under the grammar's mask, walking the draft position by
position with the matcher (`constrained_choices`), so it equals constrained AR mode the same way.
The accepted draft tokens' KV from the commit pass is kept; rejected slots are cropped (or,
where rows accepted different counts, masked).

The commit pass writes the whole draft into the KV cache, so a row whose next draft would run
past the context goes on in a batch of its own with drafts sized down to the positions it has
left (`engines.block.split_near_the_end`): no position past the context is ever used, and
prompt + `max_new_tokens` up to the context fit, as in AR.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from engines.ar import choose, decode_ar, next_tokens
from engines.batch import SequenceBatch, prefill
from engines.block import BlockParams, context_length, denoise_canvas, room_left, split_near_the_end
from engines.rows import Admit, Row, retire


def draft_canvas(batch: SequenceBatch, rows: list[Row], params: BlockParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The drafter: block mode's denoiser. Returns (draft (B, C), steps (B,))."""
    return denoise_canvas(batch, [r.generator for r in rows], params)


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


@dataclass
class Rows:
    """Rows that draft and verify together."""

    batch: SequenceBatch  # their KV cache: prompt + output so far
    live: list[Row]  # the rows still decoding, in batch order
    predicted: torch.Tensor  # (B,) the AR choice for each row's next position


def verify_round(rows: Rows, params: BlockParams, seeder=None) -> None:
    """One round for every live row: draft, commit pass, accept, correct. Updates `rows` in place.
    With a `seeder` (engines.seeded.Seeder) the drafts are the rows' skeleton-seeded answers."""
    batch, live, device = rows.batch, rows.live, rows.batch.mask.device
    began = time.time_ns()
    draft, steps = seeder.drafts(batch, live, params) if seeder else draft_canvas(batch, live, params)  # (B, C)
    start = batch.slots
    commit_logits = batch.encode(draft, logits="all")  # (B, C, V): AR choice after each draft token
    ar = torch.cat([rows.predicted[:, None], ar_choices(live, draft, commit_logits, rows.predicted)], dim=1)  # (B, C + 1)
    agree = (draft == ar[:, :-1]).long().cumprod(-1)  # (B, C) 1 up to the first mismatch
    accepted = agree.sum(-1)  # (B,)
    ended = time.time_ns()
    committed = []
    for j, row in enumerate(live):
        k = int(accepted[j])
        if seeder is None:  # the seeder counted its canvas
            row.stats.decoder_calls += int(steps[j])
            row.stats.steps_per_canvas.append(int(steps[j]))
            row.stats.canvas_times_ns.append((began, ended))
        row.stats.encoder_calls += 1
        row.stats.drafted += draft.shape[1]
        row.stats.accepted += k
        committed.append(draft[j, :k].tolist() + [int(ar[j, k])])
    keep = retire(live, committed)
    # Keep the KV of accepted draft tokens only; the AR token at the mismatch is encoded next.
    longest = int(accepted.max())
    batch.keep_slots(start + longest)
    batch.invalidate(torch.arange(longest, device=device)[None] < accepted[:, None], start)
    rows.live = [live[j] for j in keep]
    if keep:
        keep_t = torch.tensor(keep, device=device)
        batch.select(keep_t)
        correction = ar[keep_t, accepted[keep_t]]  # (B,)
        logits = batch.encode(correction[:, None], logits="last")
        for row in rows.live:
            row.stats.encoder_calls += 1
        rows.predicted = next_tokens(rows.live, logits[:, None])[:, 0]


@torch.inference_mode()
def decode_verified(
    model, rows: list[Row], params: BlockParams, pad_id: int, admit: Admit | None = None, max_batch: int = 0, seeder=None
) -> None:
    """Decode `rows` in verified mode; newcomers from `admit` join between rounds. Rows with a
    skeleton (`seeder` given, params.seeded) draft one round as skeleton-seeded answers (the
    skeleton is accepted for free wherever the values before it were); AR finishes the rest."""
    context = context_length(model)
    batch, logits = prefill(model, rows, pad_id, logits="last")  # (B, V)
    main = Rows(batch, list(rows), next_tokens(rows, logits[:, None])[:, 0])  # the batch newcomers join
    if seeder is not None:
        # Seeded drafts cover the answer from its start, so they serve one round; a plain canvas
        # drafted after a mismatch inside a value is mostly rejected under the grammar, so what
        # the seeded draft left, constrained AR finishes (the same tokens, at AR's cost).
        verify_round(main, params, seeder)
        if main.live:
            decode_ar(model, main.live, pad_id)
        return
    alone: list[Rows] = []  # rows near the end of the context, each in a batch of its own
    while True:
        stay, leaving = split_near_the_end(main.batch, params.canvas, context)
        alone += [Rows(own, [main.live[j]], main.predicted[j : j + 1]) for j, own in leaving]
        if leaving:
            main.live, main.predicted = [main.live[j] for j in stay], main.predicted[stay]
        if main.live:
            verify_round(main, params)
        for own in alone:
            # validate() let in only prompt + max_new_tokens <= context, so the room is never empty
            verify_round(own, replace(params, canvas=min(params.canvas, room_left(own.batch, context))))
        alone = [own for own in alone if own.live]
        running = len(main.live) + sum(len(own.live) for own in alone)
        joining = admit(max_batch - running) if admit else []
        if joining:
            new_batch, new_logits = prefill(model, joining, pad_id, logits="last")
            new_predicted = next_tokens(joining, new_logits[:, None])[:, 0]
            if main.live:
                main.batch.merge(new_batch)
                main.live, main.predicted = main.live + joining, torch.cat([main.predicted, new_predicted])
            else:
                main = Rows(new_batch, list(joining), new_predicted)
        if not main.live and not alone:
            return
