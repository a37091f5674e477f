"""Constrained AR for the slots a seeded canvas could not fill: only those slots, never the whole answer.

A seeded canvas's answer (engines.modes.seeded) is pieces in order: skeleton text and slot values. The
row's grammar reads them (`start_answer`); where it first refuses a token inside a slot's value (or
right after it: an empty number, a string under its `minLength`), or where a value is still cut at
its widest slot, the row commits what comes before, and AR writes that slot from there, token by
token under the grammar (`finish_slots`). When the text AR wrote closes the value (`value_end`: a
string's unescaped quote, a JSON value's first `,` `}` `]` outside brackets and strings), the rest
of the skeleton follows from the text AR already wrote of it, and the canvas's later slots after
it, read by the grammar the same way. So AR's tokens are the refused slots' values, plus the token
that ends each (it often carries the next skeleton text, `",`).

AR writes on to the end of the answer instead only where the skeleton cannot be followed: the grammar
refuses the skeleton's own text (a path it does not allow), what AR wrote after a value is not the
skeleton's next text, or the answer would not leave room to end by max_new_tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engines.modes.ar import choose
from engines.batch.prefill import prefill
from engines.decode.rows import Row
from engines.modes.seeded_layout import SlotSpan

Piece = tuple[SlotSpan | None, list[int], bool]  # (slot or None for skeleton text, tokens, cut: the value filled its widest slot)


@dataclass
class SlotPlan:
    """A row AR is writing: the slot it is in (None: AR writes on to the end) and what follows it."""

    kind: str | None
    written: list[int] = field(default_factory=list)  # the slot's value so far: the canvas's accepted part, then AR's tokens
    rest: list[Piece] = field(default_factory=list)  # the pieces after the slot


def value_end(kind: str, text: str) -> int | None:
    """Where a slot's value ends in `text` (what was written from the slot's start on): the index of
    the first character after the value, or None if it has not ended. A string slot starts inside
    its quotes; any other kind is a JSON value."""
    inside, escaped, depth = kind == "string", False, 0
    for i, ch in enumerate(text):
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                if kind == "string":
                    return i
                inside = False
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
        elif depth:
            depth -= ch in "]}"
        elif ch in ",]}":
            return i
    return None


def _slot_tokens(pieces: list[Piece], upto: int) -> int:
    """Slot value tokens among the first `upto` tokens of `pieces`."""
    n, at = 0, 0
    for span, ids, _ in pieces:
        if span is not None:
            n += max(0, min(len(ids), upto - at))
        at += len(ids)
    return n


def start_answer(row: Row, pieces: list[Piece], seeder) -> SlotPlan | None:
    """Commit `pieces` to `row` as far as its grammar takes them. Returns None when the answer is
    complete (or the row finished), else the plan for AR: the slot it writes, and what follows."""
    tokens = [t for _, ids, _ in pieces for t in ids]
    ok = len(tokens) if row.constraint is None else row.constraint.accepts(tokens)
    trouble, at = ok, 0
    for span, ids, cut in pieces:  # a value still cut after its widest canvas is finished by AR too
        if cut and at + len(ids) < trouble:
            trouble = at + len(ids)
        at += len(ids)
    room = trouble if row.constraint is None else row.constraint.room_prefix(tokens[:trouble])
    plan = None
    if trouble < len(tokens) or any(cut for *_, cut in pieces):
        plan, at = SlotPlan(None), 0
        for k, (span, ids, _) in enumerate(pieces):
            if span is not None and at <= trouble <= at + len(ids):  # in the slot's value, or right after it
                plan = SlotPlan(span.slot.kind, tokens[at:trouble], pieces[k + 1 :])
                break
            if span is None and at <= trouble < at + len(ids):  # the skeleton's own text: AR writes on
                break
            at += len(ids)
    if room < trouble:  # the answer would not leave room to end by max_new_tokens: AR writes on from there
        plan, trouble = SlotPlan(None), room
    row.extend(tokens[:trouble])
    row.stats.slot_tokens_block += _slot_tokens(pieces, trouble)
    if row.leaving:
        return None
    if plan is None:
        if row.constraint is None or row.constraint.accepting:
            row.extend([seeder.filler])  # the skeleton is complete (a grammar may allow more, e.g. parallel calls: one is the answer)
            return None
        plan = SlotPlan(None)  # complete as laid out, yet the grammar wants more: AR writes on
    row.stats.seeded_fallback = True
    return plan


def after_value(row: Row, plan: SlotPlan, seeder) -> tuple[SlotPlan | None, list[int]]:
    """After AR's token: if the slot's value has ended, the skeleton and the later slots follow.
    Returns the plan from here (None: the answer is complete) and the tokens committed besides AR's."""
    if plan.kind is None:
        return plan, []
    text = "".join(seeder.texts[t] if t < len(seeder.texts) else "\ufffd" for t in plan.written)
    end = value_end(plan.kind, text)
    if end is None:
        return plan, []
    over = text[end:]  # what AR wrote past the value: the start of the skeleton's next text
    following = plan.rest[0] if plan.rest else None
    rest_text = "".join(seeder.texts[t] for t in following[1]) if following is not None and following[0] is None else ""
    if not rest_text.startswith(over):
        return SlotPlan(None), []  # not the skeleton's text: AR writes on
    pieces = [(None, seeder.encode(rest_text[len(over) :]), False), *plan.rest[1:]] if following is not None else []
    before = len(row.output)
    if not pieces:
        return SlotPlan(None), []  # the value was the answer's last part: AR ends it
    following_plan = start_answer(row, pieces, seeder)
    return following_plan, row.output[before:]


@torch.inference_mode()
def finish_slots(model, rows: list[Row], plans: list[SlotPlan], pad_id: int, seeder) -> None:
    """Constrained AR for `rows` (their accepted prefix committed), each as its plan says, until each
    is complete. One encoder call per step for the batch: the row's AR token and whatever skeleton
    and canvas slots it unlocked, right-padded."""
    batch, logits = prefill(model, rows, pad_id, logits="last")  # (B, V)
    live, plans = list(rows), list(plans)
    while live:
        step: list[list[int]] = []
        keep: list[int] = []
        for j, row in enumerate(live):
            token = int(choose(row, logits[j][None])[0])
            if not row.cancelled:
                row.extend([token])
                row.stats.slot_tokens_ar += 1
                if plans[j].kind is not None:
                    plans[j].written.append(token)
            added: list[int] = []
            if not row.leaving:
                plans[j], added = after_value(row, plans[j], seeder)
            if row.leaving:
                row.close()
                continue
            keep.append(j)
            step.append([token, *added])
        if not keep:
            return
        batch.select(torch.tensor(keep, device=model.device))
        live, plans = [live[j] for j in keep], [plans[j] for j in keep]
        width = max(map(len, step))
        ids = torch.full((len(step), width), pad_id, dtype=torch.long, device=model.device)
        valid = torch.zeros((len(step), width), dtype=torch.bool, device=model.device)
        for i, s in enumerate(step):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            valid[i, : len(s)] = True
        out = batch.encode(ids, valid, logits="all" if width > 1 else "last")
        logits = out if width == 1 else out[torch.arange(len(step)), torch.tensor([len(s) - 1 for s in step])]
        for row in live:
            row.stats.encoder_calls += 1
