"""Decode loops as generators, one step at a time: how one thread interleaves several modes' batches.

Each mode's loop (`engines.modes.loops.LOOPS`, one signature: engines.decode.loop.Loop) is a generator
that yields after each step and returns when its batch is empty. A step is at most:
- AR: one encoder pass (a token for every row, with its prompt-lookup guesses), or a prefill;
- block: one denoising pass of a canvas, or the commit pass that ends it, or a prefill;
- verified: one round (its draft's denoising passes and the commit pass: `verify_round` stays
  one call, so its drafter can be swapped in tests), or one AR step, or a prefill.
Between steps nothing runs: the scheduler (`engines.replica.scheduler`) picks which batch steps next, so a
batch of canvases and a batch of AR tokens take turns on one copy of the weights. Rows join and
leave inside a loop's own steps (`LoopContext.newcomers`), exactly as when it runs alone: a request
gets the same tokens however its batch's steps are interleaved with others'.

`drain(steps)` runs a loop to its end and returns its value (engines.replica.direct, a canvas's drafts).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")
Steps = Generator[None, None, T]  # yields after every step; its return value is the loop's result


def drain(steps: Steps[T]) -> T:
    """Run `steps` to the end, without interleaving; returns what the loop returns."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value
