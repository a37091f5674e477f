"""When each slot of a seeded canvas is read: a step budget that follows the slots, and commits in
confidence order.

A skeleton-seeded canvas (engines.seeded) denoises only its value slots, so what it has to decide
is the slot tokens, not the canvas: a row's step budget is `STEPS_PER_SLOT_TOKEN` per slot position
it denoises (at least 1, at most the request's `max_denoising_steps`), whatever the skeleton around
them. After every step each open slot gets an uncertainty: the mean entropy (nats) of the positions
its value takes, its end (the first filler) included; an enum slot, the entropy of its choice
posterior per position of the choice. Then:

- a slot under the request's `confidence_threshold` is committed at once: a confident slot is
  read after one step (the canvas stop rule asked the whole canvas to be confident, and stable for
  another step, before any of it was read);
- the least uncertain slots are committed until `floor(slots * steps / budget)` are: one slot of
  three in 6 steps is due after step 2, the last at step 6. (The first step's argmax is read off
  pure noise: forcing a commit there, as `ceil` does, fixed a wrong first value, "Aofia" for
  "Sofia", that the later steps then built on.)

A committed slot is fixed (its value, then filler) for the steps after: the slots still open see
it as certain, as they see the skeleton. The row's canvas is done when every slot is committed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engines.skeleton_canvas import SlotSpan

STEPS_PER_SLOT_TOKEN = 0.125  # denoising steps per slot position: a 12-token string slot gets 2 (docs/benchmarks.md)


def step_budget(positions: int, max_steps: int) -> int:
    """Denoising steps for a canvas with `positions` slot positions to denoise."""
    return max(1, min(max_steps, math.ceil(positions * STEPS_PER_SLOT_TOKEN)))


@dataclass
class OpenSlot:
    span: SlotSpan
    offset: int  # its first position among the row's slot positions (engines.seeded.Seeding.index)


class SlotSchedule:
    """Which slots each row of a batch of seeded canvases commits after each step."""

    def __init__(self, open_slots: list[list[OpenSlot]], positions: list[int], max_steps: int, threshold: float):
        self.open = [list(slots) for slots in open_slots]  # per row, the slots not committed yet
        self.total = [len(slots) for slots in open_slots]
        self.budget = [step_budget(n, max_steps) for n in positions]
        self.steps = [0] * len(open_slots)  # steps each row has taken
        self.threshold = threshold

    def done(self, b: int) -> bool:
        return not self.open[b]

    def remaining(self, b: int) -> int:
        """Steps row b has left in its budget, counting the one it is about to take (>= 1)."""
        return max(1, self.budget[b] - self.steps[b])

    def commit(self, b: int, uncertainty: list[float]) -> list[OpenSlot]:
        """After row b's step: the open slots to commit now, given each open slot's uncertainty (in
        `open[b]`'s order); they leave `open[b]`."""
        self.steps[b] += 1
        due = self.total[b] * self.steps[b] // self.budget[b] - (self.total[b] - len(self.open[b]))
        order = sorted(range(len(self.open[b])), key=lambda i: uncertainty[i])
        chosen = [i for k, i in enumerate(order) if k < due or uncertainty[i] < self.threshold]
        taken = [self.open[b][i] for i in sorted(chosen)]
        self.open[b] = [s for i, s in enumerate(self.open[b]) if i not in set(chosen)]
        return taken


def value_uncertainty(tokens: list[int], entropy: list[float], filler: int) -> float:
    """Mean entropy over a free slot's value positions, its first filler included (all of them
    when the value fills the slot)."""
    n = tokens.index(filler) + 1 if filler in tokens else len(tokens)
    return sum(entropy[:n]) / max(1, n)
