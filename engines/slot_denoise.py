"""The steps of a batch of skeleton-seeded canvases (engines.seeded): slots committed in confidence
order (engines.slot_schedule), each committed slot then laid out compact.

Every step is one decoder pass over the canvas, the skeleton fixed (`Seeding.constrain_`); sampling,
acceptance and renoising run over the open slots' positions (B, S) only. After the step, each row
commits the slots its schedule names: a slot's value is its argmax tokens up to the first filler
(an enum: its best choice), as the library commits a canvas's argmax. A committed slot becomes
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

from engines.logits import sample_tokens, self_conditioning_embeddings, token_entropy
from engines.sampling import RowSeededEntropyBoundSampler, active_rows, schedule_temperature
from engines.skeleton_canvas import CanvasLayout
from engines.slot_schedule import SlotSchedule, value_uncertainty

Relayout = Callable[[int, dict[str, list[int]]], CanvasLayout]  # (row, known slot values) -> its layout, same size


class SlotSampler(RowSeededEntropyBoundSampler):
    """The row-seeded entropy-bound sampler over each row's slot positions (B, S): row b draws
    noise and samples for its first `lengths[b]` positions only, whatever else shares the batch."""

    def __init__(self, entropy_bound: float, lengths: list[int], width: int, vocab_size: int, generators: list[torch.Generator]):
        super().__init__(entropy_bound, width, vocab_size, generators)
        self.lengths = lengths

    def initialize_canvas(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        canvas = torch.zeros(batch_size, self.canvas_length, dtype=torch.long, device=device)
        for b in active_rows(self.active):
            canvas[b, : self.lengths[b]] = torch.randint(0, self.vocab_size, (self.lengths[b],), generator=self.generators[b], device=device)
        return canvas


def position_map(old: CanvasLayout, new: CanvasLayout, size: int) -> list[int]:
    """For each of the `size` positions of `new` (the same template as `old`, some slots now known and
    compact), the position of `old` it continues: skeleton to skeleton, a slot's to the same slot's."""
    out, at = [], 0
    for so, sn in zip(old.spans, new.spans):
        out += range(at, so.start)
        out += [so.start + min(i, so.capacity - 1) for i in range(sn.capacity)]
        at = so.end
    return out + [min(at + i, size - 1) for i in range(size - len(out))]


def _relaid(seeding, relayout: Relayout, known: list[dict[str, list[int]]], current: torch.Tensor, conditioning: torch.Tensor):
    """The batch laid out again with `known` values: the new Seeding, and the open slots' tokens (B, S')
    and self-conditioning (B, C, H) moved to their new positions."""
    B, C = seeding.tokens.shape
    device = current.device
    new = type(seeding)([relayout(b, known[b]) for b in range(B)], seeding.allowed, seeding.ends, device)
    canvas_map = torch.tensor([position_map(o, n, C) for o, n in zip(seeding.layouts, new.layouts)], device=device)  # (B, C)
    slot_map = torch.zeros(B, new.index.shape[1], dtype=torch.long)
    for b in range(B):
        offset = {o.span.slot.path: o.offset for o in seeding.open[b]}
        at = [offset[o.span.slot.path] + i for o in new.open[b] for i in range(o.span.capacity)]
        slot_map[b, : len(at)] = torch.tensor(at, dtype=torch.long)
    current = current.gather(1, slot_map.to(device))
    conditioning = conditioning.gather(1, canvas_map[:, :, None].expand(-1, -1, conditioning.shape[-1]))
    return new, current, conditioning


@torch.inference_mode()
def denoise_seeded(batch, generators: list[torch.Generator], params, seeding, relayout: Relayout):
    """Denoise a batch of seeded canvases (`seeding`: engines.seeded.Seeding) after the batch's cached
    tokens until every slot is committed. A row's temperature follows the library's linear schedule
    over its own budget; the commit decisions read the step's argmax and entropies on the host, once
    per step. Each row's slot logits (S, V) are taken one row at a time, so the step's logits stay
    its only (B, C, V) tensor. Returns the last Seeding (every slot known: its layouts and tokens
    are the answers), the steps each row took (B,), and per row the paths of the slots whose value
    filled them (it may have been cut)."""
    B, C = seeding.tokens.shape
    device = seeding.tokens.device
    vocab = batch.model.config.text_config.vocab_size
    known = [{s.slot.path: lay.tokens[s.start : s.end] for s in lay.spans if s.known} for lay in seeding.layouts]
    overflowed: list[set[str]] = [set() for _ in range(B)]
    sampler = SlotSampler(params.entropy_bound, seeding.lengths, seeding.index.shape[1], vocab, generators)
    schedule = SlotSchedule(seeding.open, seeding.lengths, params.steps, params.confidence_threshold)
    inputs = batch.canvas_inputs(C)
    sampler.active = [not schedule.done(b) for b in range(B)]
    current = sampler.initialize_canvas(B, device)  # (B, S) uniform noise in the slots
    self_conditioning = None  # (B, C, H)
    while any(sampler.active):
        running, S = list(sampler.active), seeding.index.shape[1]
        logits = seeding.constrain_(batch.denoise(seeding.full(current), self_conditioning, inputs))  # (B, C, V)
        sampled = torch.zeros(B, S, dtype=torch.long, device=device)
        argmax = torch.zeros(B, S, dtype=torch.long, device=device)
        entropy = torch.zeros(B, S, dtype=logits.dtype, device=device)
        for b in active_rows(running):
            logits[b].div_(schedule_temperature(params.t_min, params.t_max, schedule.budget[b], schedule.remaining(b)))
            slot_logits = logits[b, :, :vocab].index_select(0, seeding.index[b])  # (S, V): row b's slots
            n = seeding.lengths[b]
            sampled[b, :n] = sample_tokens(slot_logits[:n], generators[b])  # a row draws for its own slots only, as it would alone
            argmax[b] = slot_logits.argmax(-1)
            entropy[b] = token_entropy(slot_logits)
        accepted = sampler.accept_by_entropy(current, sampled, entropy)
        new_current = sampler.renoise_canvas(accepted, 0)
        conditioning = self_conditioning_embeddings(batch.model, logits)  # (B, C, H)
        del logits
        if self_conditioning is not None:  # rows already done keep their canvas and self-conditioning
            held = torch.tensor([not r for r in running], device=device)
            new_current = torch.where(held[:, None], current, new_current)
            conditioning = torch.where(held[:, None, None], self_conditioning, conditioning)
        current, self_conditioning = new_current, conditioning
        top, ent = argmax.tolist(), entropy.tolist()  # the step's one host read: what each row commits
        committed = False
        for b in active_rows(running):
            uncertainty = [seeding.choice_uncertainty[b][o.span.start] if o.span.slot.kind == "enum"
                           else value_uncertainty(top[b][o.offset : o.offset + o.span.capacity], ent[b][o.offset : o.offset + o.span.capacity],
                                                  seeding.filler)
                           for o in schedule.open[b]]
            for o in schedule.commit(b, uncertainty):
                if o.span.slot.kind == "enum":
                    value = [t for t in seeding.step_tokens[b, o.span.start : o.span.end].tolist() if t != seeding.filler]
                else:
                    value = top[b][o.offset : o.offset + o.span.capacity]
                    if seeding.filler in value:
                        value = value[: value.index(seeding.filler)]
                    else:
                        overflowed[b].add(o.span.slot.path)
                known[b][o.span.slot.path] = value
                committed = True
        if committed:
            seeding, current, self_conditioning = _relaid(seeding, relayout, known, current, self_conditioning)
            sampler.lengths, sampler.canvas_length = seeding.lengths, seeding.index.shape[1]
            schedule.open = [list(o) for o in seeding.open]
        sampler.active = [not schedule.done(b) for b in range(B)]
    return seeding, torch.tensor(schedule.steps, device=device), overflowed
