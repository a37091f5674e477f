"""When each slot of a seeded canvas is read: a free slot's value grows from its start, an enum is
chosen when it is sure or when nothing is left to learn.

A skeleton-seeded canvas (engines.modes.seeded) denoises only its value slots. A copied value (a name, an
invoice number, an e-mail address) is read one token after another: the decoder finds where the
value starts in the prompt and then copies on from its own previous token, which only works while
that token is clean. Committing a whole slot from one step's argmax, as the canvas does, lets every
position guess its token beside noisy neighbours: the same token twice, a token skipped
("umwe699@benf." for "umwe69@benfa.io"; docs/benchmarks.md has the measurements). So each free
slot (string, number, integer, JSON) keeps a **prefix**, fixed in the decoder's input from the next
step on, and after every step:

- the prefix takes the step's argmax at its next position, whatever its entropy (so a slot of n
  tokens is read in at most n steps), then the positions after it while their entropy stays under
  `PREFIX_ENTROPY` (a confident run of copied tokens is read in one step);
- the value ends at the first filler the prefix reaches (committed as it is), or when the prefix
  fills the slot (committed and marked as filled: the caller widens it);
- at the request's `max_denoising_steps` every open slot is committed from the step's argmax (the
  prefix, then the rest up to the first filler).

An enum slot takes the choice its logits score highest at every step (engines.modes.seeded.Seeding); it
is committed when that choice is sure (its posterior entropy per token under the request's
`confidence_threshold`), or once every free slot of its row is committed (the choice then reads
the values around it), or at the step limit. A label, one enum slot, is read after one step.

A committed slot is fixed (its value, then the skeleton after it) for the steps after: the slots
still open see it as certain, as they see the skeleton. The row's canvas is done when every slot is.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.modes.seeded_layout import SlotSpan

PREFIX_ENTROPY = 0.3  # nats: how sure a token after the first must be to join a slot's prefix in the same step


@dataclass
class OpenSlot:
    span: SlotSpan
    offset: int  # its first position among the row's slot positions (engines.modes.seeded.Seeding.index)


@dataclass
class Commit:
    """A slot finished after a step: its value's tokens (None for an enum: the caller reads its
    choice) and whether the value filled the slot (it may have been cut)."""

    slot: OpenSlot
    value: list[int] | None
    filled: bool = False


class SlotSchedule:
    """Per row of a batch of seeded canvases: each free slot's prefix, and which slots finish after each step."""

    def __init__(self, open_slots: list[list[OpenSlot]], max_steps: int, threshold: float, filler: int):
        self.open = [list(slots) for slots in open_slots]  # per row, the slots not committed yet
        self.prefix: list[dict[str, list[int]]] = [{} for _ in open_slots]  # per row, free slot path -> its prefix
        self.steps = [0] * len(open_slots)  # steps each row has taken
        self.max_steps = max(1, max_steps)
        self.threshold = threshold
        self.filler = filler

    def done(self, b: int) -> bool:
        return not self.open[b]

    def remaining(self, b: int) -> int:
        """Steps row b may still take, counting the one it is about to take (>= 1)."""
        return max(1, self.max_steps - self.steps[b])

    def prefixes(self, b: int) -> list[tuple[OpenSlot, list[int]]]:
        """Row b's open free slots with a prefix, and the prefix: what the next step's input holds there."""
        return [(o, self.prefix[b][o.span.slot.path]) for o in self.open[b] if self.prefix[b].get(o.span.slot.path)]

    def advance(self, b: int, argmax: list[int], entropy: list[float], choice_uncertainty: dict[int, float]) -> list[Commit]:
        """After row b's step, given its slot positions' argmax tokens and entropies (nats) and each
        enum slot's choice uncertainty (by its span's start): the slots finished now, in canvas
        order; they leave `open[b]`."""
        self.steps[b] += 1
        last = self.steps[b] >= self.max_steps
        done: dict[int, Commit] = {}
        for i, o in enumerate(self.open[b]):
            if o.span.slot.kind != "enum":
                commit = self._grow(b, o, argmax[o.offset : o.offset + o.span.capacity], entropy[o.offset : o.offset + o.span.capacity], last)
                if commit is not None:
                    done[i] = commit
        free_open = any(o.span.slot.kind != "enum" and i not in done for i, o in enumerate(self.open[b]))
        for i, o in enumerate(self.open[b]):
            if o.span.slot.kind == "enum" and (last or not free_open or choice_uncertainty[o.span.start] < self.threshold):
                done[i] = Commit(o, None)
        self.open[b] = [o for i, o in enumerate(self.open[b]) if i not in done]
        return [done[i] for i in sorted(done)]

    def _grow(self, b: int, o: OpenSlot, argmax: list[int], entropy: list[float], last: bool) -> Commit | None:
        prefix = self.prefix[b].setdefault(o.span.slot.path, [])
        start = len(prefix)
        for k in range(start, o.span.capacity):
            if argmax[k] == self.filler:
                return Commit(o, list(prefix))
            if k > start and entropy[k] >= PREFIX_ENTROPY and not last:
                return None
            prefix.append(argmax[k])
        return Commit(o, list(prefix), filled=True)
