"""The steps of a batch of skeleton-seeded canvases (engines.modes.seeded): each free slot's value grown
from its start, each finished slot then laid out compact (engines.modes.seeded_schedule says when).

Every step is one decoder pass over the canvas, the skeleton fixed (`Seeding.constrain_`), each
open slot holding its prefix so far and fresh uniform noise after it: the decoder never builds on
its own earlier guesses past the prefix (kept guesses anchored wrong values: on the copy-first
checkpoint's schema test items, field exact 0.48 with the library's entropy-bound acceptance at its
0.4-0.8 temperatures, 0.63 renoised; docs/benchmarks.md). Each row draws the noise for exactly its
own slots from its own generator, so a request gets the same tokens alone or batched. The step's
logits feed self-conditioning as in the library's loop; the schedule reads their argmax and
entropies. A committed slot becomes
skeleton: the row's canvas is laid out again with the value in place, exactly its tokens, no filler
after it (`CanvasLayout.build(known=...)`). The open slots and the self-conditioning move with it
(`position_map`), so the steps go on where they were. Each committed value is plain JSON text in
its place: the open slots are denoised next to `"city": "Sofia", "name": "` as a model trained on
answers reads them, not next to a value followed by filler, which reads as the answer's end (the
shipped model left the slots after a committed one empty: measured in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engines.model.logits import self_conditioning_embeddings, token_entropy
from engines.decode.sampling import active_rows
from engines.modes.seeded_layout import CanvasLayout
from engines.modes.seeded_schedule import SlotSchedule

Relayout = Callable[[int, dict[str, list[int]]], CanvasLayout]  # (row, known slot values) -> its layout, same size


def slot_noise(lengths: list[int], width: int, vocab_size: int, generators: list[torch.Generator], active: list[bool],
               device: torch.device) -> torch.Tensor:
    """(B, width) uniform tokens: row b draws its first `lengths[b]` from its own generator, if active; the rest 0."""
    noise = torch.zeros(len(lengths), width, dtype=torch.long, device=device)
    for b in active_rows(active):
        noise[b, : lengths[b]] = torch.randint(0, vocab_size, (lengths[b],), generator=generators[b], device=device)
    return noise


def position_map(old: CanvasLayout, new: CanvasLayout, size: int) -> list[int]:
    """For each of the `size` positions of `new` (the same template as `old`, some slots now known and
    compact), the position of `old` it continues: skeleton to skeleton, a slot's to the same slot's."""
    out, at = [], 0
    for so, sn in zip(old.spans, new.spans):
        out += range(at, so.start)
        out += [so.start + min(i, so.capacity - 1) for i in range(sn.capacity)]
        at = so.end
    return out + [min(at + i, size - 1) for i in range(size - len(out))]


def _relaid(seeding, relayout: Relayout, known: list[dict[str, list[int]]], conditioning: torch.Tensor):
    """The batch laid out again with `known` values: the new Seeding, and the self-conditioning (B, C, H)
    moved to its new positions."""
    B, C = seeding.tokens.shape
    device = conditioning.device
    new = type(seeding)([relayout(b, known[b]) for b in range(B)], seeding.allowed, seeding.ends, device)
    canvas_map = torch.tensor([position_map(o, n, C) for o, n in zip(seeding.layouts, new.layouts)], device=device)  # (B, C)
    conditioning = conditioning.gather(1, canvas_map[:, :, None].expand(-1, -1, conditioning.shape[-1]))
    return new, conditioning


@torch.inference_mode()
def denoise_seeded(batch, generators: list[torch.Generator], params, seeding, relayout: Relayout):
    """Denoise a batch of seeded canvases (`seeding`: engines.modes.seeded.Seeding) after the batch's cached
    tokens until every slot is committed, at most the request's `max_denoising_steps` steps; the
    schedule reads the step's argmax and entropies on the host, once per step. Each row's slot
    logits (S, V) are taken one row at a time, so the step's logits stay its only (B, C, V) tensor.
    Returns the last Seeding (every slot known: its layouts and tokens are the answers), the steps
    each row took (B,), and per row the paths of the slots whose value filled them (it may have been cut)."""
    B, C = seeding.tokens.shape
    device = seeding.tokens.device
    vocab = batch.model.config.text_config.vocab_size
    known = [{s.slot.path: lay.tokens[s.start : s.end] for s in lay.spans if s.known} for lay in seeding.layouts]
    overflowed: list[set[str]] = [set() for _ in range(B)]
    schedule = SlotSchedule(seeding.open, params.steps, params.confidence_threshold, seeding.filler)
    inputs = batch.canvas_inputs(C)
    self_conditioning = None  # (B, C, H)
    while not all(schedule.done(b) for b in range(B)):
        running = [not schedule.done(b) for b in range(B)]
        S = seeding.index.shape[1]
        current = slot_noise(seeding.lengths, S, vocab, generators, running, device)  # (B, S)
        for b in active_rows(running):  # the prefixes read so far, clean
            for o, prefix in schedule.prefixes(b):
                current[b, o.offset : o.offset + len(prefix)] = torch.tensor(prefix, device=device)
        logits = seeding.constrain_(batch.denoise(seeding.full(current), self_conditioning, inputs))  # (B, C, V)
        argmax = torch.zeros(B, S, dtype=torch.long, device=device)
        entropy = torch.zeros(B, S, dtype=logits.dtype, device=device)
        for b in active_rows(running):
            slot_logits = logits[b, :, :vocab].index_select(0, seeding.index[b])  # (S, V): row b's slots
            argmax[b] = slot_logits.argmax(-1)
            entropy[b] = token_entropy(slot_logits)
        conditioning = self_conditioning_embeddings(batch.model, logits)  # (B, C, H)
        del logits
        if self_conditioning is not None:  # rows already done keep their self-conditioning
            held = torch.tensor([not r for r in running], device=device)
            conditioning = torch.where(held[:, None, None], self_conditioning, conditioning)
        self_conditioning = conditioning
        top, ent = argmax.tolist(), entropy.tolist()  # the step's one host read: what each row commits
        committed = False
        for b in active_rows(running):
            for c in schedule.advance(b, top[b], ent[b], seeding.choice_uncertainty[b]):
                path = c.slot.span.slot.path
                if c.value is None:  # an enum: its best choice this step
                    known[b][path] = [t for t in seeding.step_tokens[b, c.slot.span.start : c.slot.span.end].tolist() if t != seeding.filler]
                else:
                    known[b][path] = c.value
                if c.filled:
                    overflowed[b].add(path)
                committed = True
        if committed:
            seeding, self_conditioning = _relaid(seeding, relayout, known, self_conditioning)
            schedule.open = [list(o) for o in seeding.open]
    return seeding, torch.tensor(schedule.steps, device=device), overflowed
