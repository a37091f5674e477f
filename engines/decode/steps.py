"""Decode loops as generators, one step at a time: how one thread interleaves several modes' batches.

Each mode's loop (`engines.modes.block.block_steps`, `engines.modes.ar.ar_steps`, `engines.modes.verified.verified_steps`)
is a generator that yields after each step and returns when its batch is empty. A step is at most:
- AR: one encoder pass (a token for every row, with its prompt-lookup guesses), or a prefill;
- block: one denoising pass of a canvas, or the commit pass that ends it, or a prefill;
- verified: one round (its draft's denoising passes and the commit pass: `verify_round` stays
  one call, so its drafter can be swapped in tests), or one AR step, or a prefill.
Between steps nothing runs: the scheduler (`engines.replica.scheduler`) picks which batch steps next, so a
batch of canvases and a batch of AR tokens take turns on one copy of the weights. Rows join and
leave inside a loop's own steps (its `admit` callback), exactly as when it runs alone: a request
gets the same tokens however its batch's steps are interleaved with others'.

`drain(steps)` runs a loop to its end and returns its value: the plain `decode_*` functions.
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
