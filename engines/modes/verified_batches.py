"""Verified mode's two batches: the rows that draft and the rows that write by AR steps.

A `Rows` is one batch with its KV cache and each row's predicted next token; `take` and `join`
move rows (and their cache rows) between batches. `regroup` moves each row to the batch its
`engines.modes.verified_drafting.DraftControl` plan asks for before a round, and sizes the round: the largest
planned canvas, with the rows that have no room for it left to AR steps. First drafts on no credit
are granted only where no row would be left waiting through the round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.decode.canvas_settings import BlockParams
from engines.modes.verified_drafting import DraftCosts
from engines.decode.rows import Row


@dataclass
class Rows:
    """Rows that decode together: they draft and verify together, or take AR steps together."""

    batch: SequenceBatch  # their KV cache: prompt + output so far
    live: list[Row]  # the rows still decoding, in batch order
    predicted: torch.Tensor  # (B,) the AR choice for each row's next position
    lookup: bool = True  # AR steps check prompt-lookup guesses (engines.modes.ar_lookup)

    def take(self, indices: list[int]) -> "Rows":
        """Move the rows at `indices` out into a batch of their own (all of them: this batch's
        cache goes with them, and this one is left empty; an empty `Rows` never uses its batch)."""
        if len(indices) == len(self.live):
            taken = Rows(self.batch, self.live, self.predicted, self.lookup)
            self.live, self.predicted = [], self.predicted[:0]
            return taken
        index = torch.tensor(indices, dtype=torch.long, device=self.batch.mask.device)
        taken = Rows(self.batch.copy_rows(indices), [self.live[j] for j in indices], self.predicted[index], self.lookup)
        stay = [j for j in range(len(self.live)) if j not in set(indices)]
        self.batch.select(torch.tensor(stay, dtype=torch.long, device=self.batch.mask.device))
        self.live, self.predicted = [self.live[j] for j in stay], self.predicted[stay]
        return taken

    def join(self, other: "Rows") -> None:
        """Add `other`'s rows (and their cache) to this batch."""
        if not self.live:
            self.batch, self.live, self.predicted = other.batch, list(other.live), other.predicted
            return
        self.batch.merge(other.batch)
        self.live, self.predicted = self.live + other.live, torch.cat([self.predicted, other.predicted])


def regroup(drafting: Rows, stepping: Rows, params: BlockParams, costs: DraftCosts, context: int) -> BlockParams | None:
    """Move each row to the batch its plan asks for; returns the drafting batch's round settings
    (its largest planned canvas and step budget), or None when no row drafts now."""
    # Drafts are priced at the size of everything running: the drafting and the stepping batch take
    # turns on one machine, so while a draft runs every row waits (what a batch of AR steps does not).
    running = len(drafting.live) + len(stepping.live)

    def plans(rows: Rows, grant: bool = True) -> list[tuple[int, int]]:
        return [r.draft.plan(costs, running, params.steps, context - len(r.prompt_ids) - len(r.output), grant) for r in rows.live]

    # First drafts are granted (drafted on no credit) only where no row of the batch would be left
    # waiting through the round: a granted round stops every row that does not draft, and what one
    # short answer's draft saves does not pay the others' wait (a chunk of 16-token code answers and
    # hand-written prompts took 1.30x AR at batch 8). Rows still draft on credit they earned.
    grant = all(canvas > 0 for canvas, _ in plans(drafting) + plans(stepping))

    to_ar = [j for j, (canvas, _) in enumerate(plans(drafting, grant)) if canvas == 0]
    to_draft = [j for j, (canvas, _) in enumerate(plans(stepping, grant)) if canvas > 0]
    moving = stepping.take(to_draft) if to_draft else None
    if to_ar:
        stepping.join(drafting.take(to_ar))
    if moving:
        drafting.join(moving)
    if not drafting.live:
        return None
    # The round drafts the largest planned canvas: rows without room for it take AR steps this round.
    wanted = plans(drafting, grant)
    canvas = max(c for c, _ in wanted)
    room = [context - len(r.prompt_ids) - len(r.output) for r in drafting.live]
    out = [j for j, ((c, _), left) in enumerate(zip(wanted, room)) if c == 0 or left < canvas]
    if out:
        stepping.join(drafting.take(out))
        wanted = [w for j, w in enumerate(wanted) if j not in set(out)]
    if canvas == 0 or not drafting.live:
        return None
    return replace(params, canvas=canvas, steps=max(s for c, s in wanted if c == canvas))
