"""Verified mode's draft plan: how long each row's next draft is, how many steps it gets, and
whether the row drafts at all or writes by AR steps for now.

Drafts adapt per row (`DraftControl`), priced in AR steps by the engine's cost profile
(`DraftCosts`): a round costs its denoising steps, the verify pass and the correction, and writes
its accepted prefix plus one token. Each row holds a *credit*, the AR steps it may still lose to
drafts that miss: its first draft (`FIRST_CANVAS` tokens, `FIRST_STEPS` steps) is granted, a
round adds what it saved (or takes what it lost), and every token written adds `ALLOWANCE` (a
quarter of it once AR hesitated before the row's first draft: `HESITANT_SLOWDOWN`). The
first draft is granted only where a fully accepted one would pay (`DraftControl.granted`). A row drafts only what its credit covers if the whole
draft were rejected (smaller canvases, fewer steps), else it writes by plain AR steps in the same
request until the allowance has paid for a new try. So a request whose drafts miss costs about
AR's time plus its first draft. Canvases grow after a fully accepted draft and shrink toward what
was accepted after a miss; the step budget stops where even a fully accepted draft would no longer
write `TARGET_GAIN` times what AR writes in the same time. A row alone drafts only where AR is sure
of its next token (`SURE_ENTROPY`): a draft is accepted from its first token on, so where AR itself
hesitates the draft rarely matches, and the row writes that token by an AR step (and the first
draft's grant lapses once AR hesitates before it: an answer AR is unsure of from its start costs
AR's time). A draft that ended soon after what a round wrote leaves the tail to AR steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from engines.decode.canvas_settings import BlockParams
from engines.cost import CostProfile
from engines.decode.sampling import make_generator

MIN_DRAFT = 8  # the smallest draft canvas
MIN_STEPS = 2  # a draft gets at least this many denoising steps (fewer rarely agree with AR)
TARGET_GAIN = 2.0  # a fully accepted draft must write this many times what AR writes in its time
ALLOWANCE = 0.1  # AR steps of credit each written token earns toward a new draft, halved after each miss in a row
# A row whose AR hesitated before its first draft (a prompt unlike what the drafter learned: its
# drafts are rejected) earns credit this many times slower, so a probe comes every ~170 tokens, not
# every ~40: on hand-written prompts one rejected probe cost a 40-token answer 10-30% of AR's time.
HESITANT_SLOWDOWN = 4
FIRST_STEPS = 2  # the first draft's steps: the shipped model's drafts that AR accepts are right after two
FIRST_CANVAS = 32  # the first draft's most tokens: most structured answers fit, a miss costs little
# The first draft of an answer whose expected length (`GenerationRequest.expected_tokens`, the
# router's p90) is past LONG_ANSWER tokens: the suite's plans (40-55 tokens, p90 50-74) then write in
# one round, not two (batch 1, 10 plans: 3x -> 6x AR's speed on most). Not for shorter answers
# (summaries and code of 13-18 tokens, p90 30-43): their drafts are accepted about as often at 32 as
# at 64, and a 64-token step costs more.
LONG_FIRST_CANVAS = 64
LONG_ANSWER = 48
# A draft whose first step's mean entropy over its first positions is above this (nats) is dropped
# there: measured on the shipped model, drafts AR accepts sit under 0.55 (extractions up to 1.4),
# drafts it rejects at 1.6 and up (engines.modes.block.head_entropy; docs/engines.md).
ABANDON_ENTROPY = 1.0
# A row drafts only while the entropy (nats) of AR's choice for its next position is under this.
# Measured on the shipped model: along the suite's summaries, plans and code, whose drafts AR
# accepts, it stays under 0.1 (0.3 at most); realistic free text and writing, whose drafts AR
# rejects, run 1-3 nats, and the shortest answers start at 2.2-2.8 (docs/engines.md).
SURE_ENTROPY = 0.5


def first_canvas(expected: int | None) -> int:
    """The first draft's size for an answer of `expected` tokens (None: unknown)."""
    return LONG_FIRST_CANVAS if expected is not None and expected > LONG_ANSWER else FIRST_CANVAS


class DraftCosts:
    """What drafting costs, in AR steps (one encoder call over one new token per row, at the same
    batch size), from the engine's cost profile; without one, a pass over C tokens at batch B is
    assumed to cost 1 + C * B / 64 AR steps (the shape measured on a CPU)."""

    def __init__(self, profile: CostProfile | None = None):
        self.profile = profile

    def step(self, canvas: int, batch: int) -> float:
        """One denoising step of a draft (or the verify pass over it)."""
        if self.profile is None:
            return 1.0 + canvas * batch / 64
        return self.profile.draft_ms(canvas, batch) / self.profile.forward_ms("ar", batch)

    def round(self, canvas: int, steps: int, batch: int) -> float:
        """A round: its denoising steps, the verify pass over the draft, the correction."""
        return (steps + 1) * self.step(canvas, batch) + 1.0

    def step_budget(self, canvas: int, batch: int, most: int) -> int:
        """The most steps after which a fully accepted draft (canvas + 1 tokens) still writes
        TARGET_GAIN times what AR writes in the round's time (at least MIN_STEPS, at most `most`)."""
        fits = int(((canvas + 1) / TARGET_GAIN - 1) / self.step(canvas, batch)) - 1
        return max(min(MIN_STEPS, most), min(most, fits))


@dataclass
class DraftControl:
    """One row's drafting plan in verified mode."""

    canvas: int  # the next draft's size when credit allows
    largest: int  # the model's canvas
    noise: torch.Generator = field(default_factory=lambda: make_generator(0))  # the drafts' starting noise
    credit: float = 0.0  # AR steps this row may still lose to drafts that miss
    first: bool = True  # the first draft may be granted whatever the credit (`granted`)
    misses: int = 0  # rounds in a row that lost time against AR (each halves the allowance)
    sure: bool = True  # whether AR is sure of the row's next token (SURE_ENTROPY): alone, only then does it draft
    hesitated: bool = False  # AR was unsure of a token before the row's first draft
    sure_below: float = SURE_ENTROPY  # the entropy under which AR counts as sure of a token
    ends_in: int | None = None  # tokens the last draft still had before its end, past what was written
    reserve: float = 0.0  # the credit the smallest draft needs (set by `plan`): AR steps earn credit up to it
    drafts: bool = True  # False: an AR-mode row in verified's loop (engines.replica.scheduler), which writes by AR steps only
    most_steps: int | None = None  # the request's own cap on a draft's denoising steps (None: its batch's)

    @classmethod
    def start(cls, params: BlockParams, largest: int, seed: int | None = None, sure_below: float = SURE_ENTROPY,
              expected: int | None = None) -> "DraftControl":
        """A row's plan before its first draft (`expected`: the answer's expected length, if known).
        The drafts' noise is seeded (by the request's seed, or 0): a request drafts alike every
        time, so its speed is reproducible (its tokens are AR's anyway)."""
        return cls(canvas=min(params.canvas, first_canvas(expected)), largest=largest, noise=make_generator(0 if seed is None else seed),
                   sure_below=sure_below)

    @classmethod
    def for_request(cls, request, params: BlockParams, largest: int, sure_below: float = SURE_ENTROPY) -> "DraftControl":
        """`start` for an `engines.types.GenerationRequest`: its first draft at most its own canvas
        setting and step count (verified requests of several canvases and step counts batch
        together under the model's), its seed, its expected length. An AR request never drafts: it
        rides in verified's batches for their AR steps (one encoder pass for both modes' tokens) and
        writes AR's tokens, as in AR mode."""
        if request.mode == "ar":
            return cls(canvas=0, largest=largest, sure_below=sure_below, drafts=False)
        plan = cls.start(replace(params, canvas=request.canvas or params.canvas), largest, request.seed, sure_below, request.expected_tokens)
        plan.most_steps = request.max_denoising_steps  # its own, where it asked: verified batches are keyed by neither
        return plan

    def plan(self, costs: DraftCosts, batch: int, most_steps: int, room: int, grant: bool = True) -> tuple[int, int]:
        """(canvas, steps) of the largest draft up to the planned canvas (and the `room` left in the
        context) whose loss, were it all rejected, the credit covers; (0, 0): write by AR steps.
        `grant`: whether the first draft may go ahead on no credit (`granted`)."""
        if not self.drafts:
            return 0, 0
        most_steps = self.most_steps or most_steps
        self.reserve = (min(MIN_STEPS, most_steps) + 1) * costs.step(min(MIN_DRAFT, self.canvas), batch)
        if self.waits(costs, batch, most_steps):
            return 0, 0
        canvas = min(self.canvas, room)
        if canvas >= 1 and grant and self.granted(costs, batch, most_steps, canvas):
            return canvas, min(FIRST_STEPS, most_steps)
        smallest = min(MIN_DRAFT, canvas)
        while canvas >= max(1, smallest):
            step = costs.step(canvas, batch)
            steps = min(costs.step_budget(canvas, batch, most_steps), int(self.credit / step + 1e-9) - 1)
            if steps >= min(MIN_STEPS, most_steps):
                return canvas, steps
            canvas //= 2
        return 0, 0

    def granted(self, costs: DraftCosts, batch: int, most_steps: int, canvas: int) -> bool:
        """Whether the row's first draft goes ahead on no credit: when, fully accepted, it would
        write TARGET_GAIN times what AR writes in its time (where AR batches far better than drafts
        do, a CPU at batch 8, it does not), and AR has not hesitated before it (alone or in a batch:
        in a batch a granted draft stops every row that does not draft for a round).
        Otherwise the row drafts only on the credit its tokens earn."""
        if not self.first or self.hesitated or not self.drafts:
            return False
        return canvas + 1 >= TARGET_GAIN * costs.round(canvas, min(FIRST_STEPS, most_steps), batch)

    def next_token(self, sure: bool) -> None:
        """Whether AR is sure of the row's next token."""
        self.sure = sure
        self.hesitated |= not sure and self.first

    def waits(self, costs: DraftCosts, batch: int, most_steps: int) -> bool:
        """Whether the row writes its next token by an AR step whatever its credit: AR is unsure of
        it, or the last draft ended so soon after it that AR steps write the rest for less than the
        cheapest draft round costs (a draft writes at most up to its answer's end). AR's doubt
        holds a row back only when it runs alone: in a batch, a row that rides along in the others'
        round still writes its AR token, at a small share of the round, where holding it back would
        split the batch into two that take turns."""
        if not self.sure and batch == 1:
            return True
        cheapest = costs.round(min(MIN_DRAFT, self.canvas), min(MIN_STEPS, most_steps), batch)
        return self.ends_in is not None and self.ends_in + 1 <= cheapest

    def drafted(self, accepted: int, canvas: int, cost: float, ends_in: int | None = None) -> None:
        """After a round that drafted `canvas` tokens, `accepted` of them, at `cost` AR steps;
        `ends_in`: the draft's tokens left before its stop token past the written ones (None: the
        draft did not end, or ended where the answer did)."""
        written = accepted + 1
        self.ends_in = ends_in
        self.credit += written * (1 + ALLOWANCE) - cost
        self.misses = 0 if written >= cost else self.misses + 1
        self.first = False
        if accepted >= canvas:
            self.canvas = min(self.largest, 2 * canvas)
        else:  # toward twice what was accepted: the next guess is as long as the last good run
            self.canvas = min(canvas, max(MIN_DRAFT, 1 << (2 * written - 1).bit_length()))

    def abandoned(self, cost: float) -> None:
        """After a draft dropped at its first step (`cost` AR steps); an AR step writes the token."""
        self.credit -= cost
        self.misses += 1
        self.first = False
        self.canvas = MIN_DRAFT
        self.ends_in = None

    @property
    def allowance(self) -> float:
        base = ALLOWANCE / HESITANT_SLOWDOWN if self.hesitated else ALLOWANCE
        return base / 2 ** min(max(self.misses - 1, 0), 4)

    def stepped(self) -> None:
        """After an AR step. The allowance pays for one new try, not for several: while a row waits
        (AR unsure of its tokens) credit would otherwise pile up and buy a run of probes in a row."""
        if self.credit < self.reserve:
            self.credit = min(self.credit + self.allowance, self.reserve)
        if self.ends_in is not None:  # past the draft's end and still writing: its end was wrong
            self.ends_in = self.ends_in - 1 if self.ends_in > 0 else None

    def steps_to_draft(self, costs: DraftCosts, batch: int, most_steps: int) -> int:
        """AR steps before the credit covers the smallest draft (0: it does now; at least 1 while
        the row `waits`: look again after it). An AR row: 1, so a batch holding one looks at its
        newcomers after every AR step, as AR mode's loop does."""
        if not self.drafts:
            return 1
        most_steps = self.most_steps or most_steps
        least = 1 if self.waits(costs, batch, most_steps) else 0
        if self.granted(costs, batch, most_steps, self.canvas):
            return least
        canvas = min(MIN_DRAFT, self.canvas)
        need = (min(MIN_STEPS, most_steps) + 1) * costs.step(canvas, batch)
        return max(least, math.ceil((need - self.credit) / self.allowance))
