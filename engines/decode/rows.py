"""Per-request decode state: output tokens, stop conditions, incremental text, stats.

Every mode appends tokens through `Row.extend`, so stop tokens, stop strings and
`max_new_tokens` behave the same in block, verified and AR mode. Under a grammar a stop string
applies only outside the constrained span (a free-text answer under tool_choice auto), never
inside JSON or a tool call: one rule for every mode, streamed or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from engines.grammar.constraint import TokenConstraint
from engines.types import DecodeStats, FinishReason, GenerationRequest, GenerationResult

if TYPE_CHECKING:
    from engines.decode.prompt_lookup import Lookup
    from engines.batch.prefix_cache import PrefixCache

# Text that may still grow into a stop string, or an unfinished multi-byte character, is held back.
_INCOMPLETE_CHAR = "\ufffd"


@dataclass
class Row:
    request: GenerationRequest
    prompt_ids: list[int]
    stop_ids: frozenset[int]
    generator: torch.Generator
    decode: Callable[[list[int]], str]  # token ids -> text
    on_text: Callable[[str], None] | None = None  # receives text deltas as tokens are committed
    on_done: Callable[["Row"], None] | None = None  # called once, when the row leaves its batch
    constraint: TokenConstraint | None = None  # the request's grammar state, advanced by `extend`
    # verified mode: this row's drafting plan (engines.modes.verified_drafting.DraftControl; a mode's own
    # type, not imported: what every loop shares stands below the modes)
    draft: Any = None
    lookup: "Lookup | None" = None  # greedy AR steps: this row's prompt-lookup odds (engines.modes.ar_lookup)
    prefix_cache: "PrefixCache | None" = None  # set when the prompt has a conversation head to reuse (engines.batch.prefix_cache)
    prefix_bounds: tuple[int, ...] = ()  # where its prefill is cut: message ends (DiffusionEngine.prefix_bounds)
    cancelled: bool = False  # set from another thread when the client goes away; honoured at the next step
    error: BaseException | None = None  # set when decoding failed; `on_done` still runs
    output: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    stop_token: int | None = None  # the stop token that ended the answer, if one did
    text: str = ""  # output text so far, cut before any stop string
    sent: int = 0  # characters of `text` already passed to `on_text`
    stats: DecodeStats = field(default_factory=DecodeStats)
    started: float = field(default_factory=time.perf_counter)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def leaving(self) -> bool:
        """Done decoding: finished, or its client went away."""
        return self.finish_reason is not None or self.cancelled

    def close(self) -> None:
        """The row left its batch: stamp its latency and tell whoever waits for it."""
        self.stats.latency_s = time.perf_counter() - self.started
        if self.cancelled and self.finish_reason is None:
            self.finish_reason = "cancelled"
        if self.on_done is not None:
            self.on_done(self)

    def extend(self, tokens: list[int]) -> int:
        """Append committed tokens until a stop; returns how many were taken (a stop token counts).
        A grammar that is complete ends the answer too (no step is spent choosing the end token)."""
        taken = 0
        for t in tokens:
            taken += 1
            if t in self.stop_ids or (self.constraint is not None and not self.constraint.consume(t)):
                self.finish_reason = "stop"
                self.stop_token = t if t in self.stop_ids else None
                break
            self.output.append(t)
            if self.constraint is not None and (self.constraint.done or len(self.output) >= self.request.max_new_tokens):
                # complete under the grammar (its closer keeps room to end by max_new_tokens), or cut
                self.finish_reason = "stop" if self.constraint.accepting else "length"
                self.stats.closed_early = self.constraint.closed_early
                break
            if len(self.output) >= self.request.max_new_tokens:
                self.finish_reason = "length"
                break
        self._update_text()
        return taken

    def _stops(self, text: str) -> list[str]:
        """The stop strings that may end this answer now: all of them without a grammar; under one,
        only in a free-text answer (one that cannot be the opener of the constrained span), so a stop
        string never cuts JSON or a tool call, in any mode (GenerationRequest.constrained_opener)."""
        if self.constraint is None or not self.request.stop:
            return self.request.stop
        opener = self.request.constrained_opener
        if opener is None or text[: len(opener)] == opener[: len(text)]:  # constrained, or not yet known to be text
            return []
        return self.request.stop

    def _update_text(self) -> None:
        text = self.decode(self.output)
        stops = self._stops(text)
        if stops:
            cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
            if cut >= 0:
                text = text[:cut]
                self.finish_reason = "stop"
        self.text = text
        if self.on_text is None:
            return
        ready = len(text)
        if not self.finished:
            while ready and text[ready - 1] == _INCOMPLETE_CHAR:
                ready -= 1
            for s in stops:  # hold back a tail that could be the start of a stop string
                for n in range(min(len(s) - 1, ready), 0, -1):
                    if text[:ready].endswith(s[:n]):
                        ready -= n
                        break
        if ready > self.sent:
            self.on_text(text[self.sent : ready])
            self.sent = ready

    def result(self) -> GenerationResult:
        self.stats.prompt_tokens = len(self.prompt_ids)
        self.stats.output_tokens = len(self.output)
        return GenerationResult(
            request_id=self.request.request_id,
            mode=self.request.mode,
            text=self.text,
            token_ids=list(self.output),
            finish_reason=self.finish_reason or "length",
            stats=self.stats,
            stop_token=self.stop_token,
        )

    def settle(self, future) -> None:
        """Hand the caller's asyncio future this row's outcome: its result, its error, or cancelled."""
        if future.done():
            return
        if self.error is not None:
            future.set_exception(self.error)
        elif self.cancelled:
            future.cancel()
        else:
            future.set_result(self.result())


# Between steps a running batch asks for newcomers: free slots -> rows that join now
# (validated, and compatible with the batch's mode and denoising settings).
Admit = Callable[[int], list[Row]]


def retire(live: list[Row], committed: list[list[int]]) -> list[int]:
    """Give each live row its committed tokens; close the rows that are done.
    Returns the batch indices of the rows that stay."""
    keep = []
    for j, (row, tokens) in enumerate(zip(live, committed)):
        if not row.cancelled:
            row.extend(tokens)
        if row.leaving:
            row.close()
        else:
            keep.append(j)
    return keep
