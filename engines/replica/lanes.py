"""One lane's running batch in the scheduler (`Batch`), its typed key and which requests it takes
(`BatchKey`: `lane`, `takes`) and the fairness rule between batches (`pick`).

The scheduler (engines.replica.scheduler) keeps one running batch per lane with work (canvases: block;
tokens: verified, with AR's rows riding in its batches) and steps them one step at a time on one
decode thread. Each `Batch` counts the decode time its steps were charged (a step's seconds shared
among the modes it served); `pick` steps the one charged the least, so the modes with work share
the thread's time equally whatever their steps cost. A new batch starts its count at the least of
those running, so it neither jumps ahead of them nor waits for them to catch up. With a thread per
lane (`lane_threads` 2) each worker steps its own lane's batch (`serves`) and the canvas worker may run
at a lower OS priority (`lower_priority`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Generator
from dataclasses import dataclass

from engines.decode.canvas_settings import BlockParams
from engines.decode.rows import Row
from engines.types import LANE_OF_MODE, Lane, Mode


@dataclass(frozen=True)
class BatchKey:
    """What a waiting request or a running batch decodes by: its mode and denoising settings (the
    engine's `validate` gives them). Equal keys batch together."""

    mode: Mode  # the loop it runs (engines.modes.loops)
    params: BlockParams | None  # denoising settings; None for AR

    @property
    def lane(self) -> Lane:
        return lane(self.mode)

    def takes(self, key: "BatchKey") -> bool:
        """Whether a running batch keyed so takes a waiting request keyed `key`: the same mode and
        settings, or an AR request in a verified batch that drafts (its rows never draft, so no setting
        of verified's is theirs; a batch of skeleton-seeded drafts has no draft for a row without a skeleton)."""
        return key == self or (key.mode == "ar" and self.mode == "verified" and not self.params.seeded)


@dataclass
class Batch:
    """One lane's running batch: its decode loop and what the fairness rule counts."""

    key: BatchKey  # the requests it admits
    rows: list[Row]  # its rows that may still be decoding (refreshed between steps)
    steps: Generator[None, None, None] | None = None  # its decode loop (engines.decode.steps); None: it failed to start
    used_s: float = 0.0  # decode time its steps were charged, from the least of the running batches' when it started
    failure: BaseException | None = None  # why its loop could not start

    def live(self) -> list[Row]:
        return [r for r in self.rows if r.finish_reason is None and r.error is None]

    def running(self) -> int:
        return len(self.live())


def pick(batches: list[Batch]) -> Batch:
    """The fairness rule: the batch that has used the least decode time steps next (ties: the one started first)."""
    return min(batches, key=lambda b: b.used_s)


def lane(mode: str) -> Lane:
    """The batches a mode's requests decode in (engines.types.LANE_OF_MODE)."""
    return LANE_OF_MODE[mode]


def lower_priority(nice: int) -> None:
    """Lower the calling thread's OS priority by `nice` (Linux schedules threads as tasks; elsewhere
    a whole process shares one priority, so nothing changes)."""
    if nice and sys.platform == "linux":
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


def serves(lanes: frozenset | None, mode: str) -> bool:
    """Whether a scheduler worker stepping `lanes` (None: every lane) decodes `mode`'s requests."""
    return lanes is None or lane(mode) in lanes
