"""One mode's running batch in the scheduler (`Batch`) and the fairness rule between batches (`pick`).

The scheduler (engines.scheduler) keeps one running batch per mode with work and steps them one
step at a time on one decode thread. Each `Batch` counts the decode time its steps used; `pick`
steps the one that has used the least, so the modes with work share the thread's time equally
whatever their steps cost. A new batch starts its count at the least of those running, so it
neither jumps ahead of them nor waits for them to catch up.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from engines.rows import Row


@dataclass
class Batch:
    """One mode's running batch: its decode loop and what the fairness rule counts."""

    key: tuple  # (mode, denoising settings): the requests it admits
    rows: list[Row]  # its rows that may still be decoding (refreshed between steps)
    steps: Generator[None, None, None] | None = None  # its decode loop (engines.stepping); None: it failed to start
    used_s: float = 0.0  # decode time its steps took, from the least of the running batches' when it started
    failure: BaseException | None = None  # why its loop could not start

    def running(self) -> int:
        return sum(1 for r in self.rows if r.finish_reason is None and r.error is None)


def pick(batches: list[Batch]) -> Batch:
    """The fairness rule: the batch that has used the least decode time steps next (ties: the one started first)."""
    return min(batches, key=lambda b: b.used_s)
