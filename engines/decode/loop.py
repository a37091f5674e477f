"""The decode-loop interface every mode implements, and the one place a loop takes newcomers.

A mode's loop is `(rows, params, ctx) -> Steps[None]` (`Loop`): the rows to decode, the batch's
denoising settings (`BlockParams`; None for AR), and a `LoopContext` holding what is the engine's
rather than the batch's: the model, its pad id, the engine's settings (prompt lookup, verified's
draft prices and sure entropy, the seeder of skeleton canvases) and, when a scheduler drives the
loop, where newcomers come from (`admit`, up to `max_batch` rows). The modes' table
(`engines.modes.LOOPS`) maps a batch's mode to its loop; the replica's engine builds the context
once per batch from its settings (`engines.replica.engine.DiffusionEngine.steps`).

Between its steps a loop asks `ctx.newcomers(running, logits)`: the rows `admit` hands over for the
free places, prefilled in one step of their own, which `Newcomers.merged` adds to the running batch.
Every loop admits through it, so rows join the same way in every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from engines.batch.prefill import prefill
from engines.batch.sequence_batch import SequenceBatch
from engines.decode.canvas_settings import BlockParams
from engines.decode.rows import Admit, Row
from engines.decode.steps import Steps


@dataclass(frozen=True)
class LoopContext:
    """What a decode loop reads that is not its batch's: the model, the engine's settings, newcomers."""

    model: Any  # the DiffusionGemma model (engines.model.loading.LoadedModel.model)
    pad_id: int  # the padding token of left-padded prefills
    admit: Admit | None = None  # between steps: free places -> rows that join now (None: nobody joins)
    max_batch: int = 0  # rows the batch may hold with its newcomers
    lookup: bool = True  # greedy AR steps check prompt-lookup guesses (engines.modes.ar_lookup)
    seeder: Any = None  # skeleton canvases (engines.modes.seeded.Seeder): block's seeded rows, verified's seeded drafts
    draft_costs: Any = None  # verified: its drafts' prices (engines.modes.verified_drafting.DraftCosts; None: the default)
    sure_entropy: float | None = None  # verified: where a row alone drafts (None: engines.modes.verified_drafting.SURE_ENTROPY)

    def alone(self) -> LoopContext:
        """The same context without newcomers: a loop's rows finished by another loop on their own."""
        return replace(self, admit=None, max_batch=0)

    def newcomers(self, running: int, logits: str) -> Steps[Newcomers | None]:
        """The rows `admit` hands over for the places `running` rows leave free, prefilled as a batch of
        their own in one step (`logits`: "last" or "none", as the loop's prefill). None, and no step,
        when none join."""
        joining = self.admit(self.max_batch - running) if self.admit else []
        if not joining:
            return None
        batch, out = prefill(self.model, joining, self.pad_id, logits=logits)
        yield
        return Newcomers(joining, batch, out)


@dataclass
class Newcomers:
    """Rows that joined a running loop, prefilled: their batch and its last-position logits (B, V) or None."""

    rows: list[Row]
    batch: SequenceBatch
    logits: torch.Tensor | None

    def merged(self, batch: SequenceBatch, live: list[Row], logits: torch.Tensor | None = None):
        """The running batch with the newcomers after its `live` rows: (batch, rows, logits). With no
        live rows the newcomers' batch is the running one."""
        if not live:
            return self.batch, list(self.rows), self.logits
        batch.merge(self.batch)
        return batch, live + self.rows, None if logits is None else torch.cat([logits, self.logits])


Loop = Callable[[list[Row], BlockParams | None, LoopContext], Steps[None]]  # one mode's decode loop
