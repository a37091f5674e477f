"""What every canvas-denoising loop shares (block mode, seeded canvases, verified's drafts): the
settings a batch of canvases is decoded under, the model's context, and the one place a canvas's
steps read the device.

Inside a canvas the step that repeats stays on the device: which rows have stopped is a device
tensor (`done`), and the host learns it only where `StopFlags.read` copies it, every
`check_every` steps. Between reads, a row that has stopped keeps being computed (its canvas is
held by `torch.where`, so its tokens do not change) and keeps drawing noise it will not use; the
read points depend only on the step index, so a request still gets the same tokens alone or in
any batch. `check_every=1` reads after every step, which is the library's own loop (and, for
sampled rows, its random draws); a larger value trades at most `check_every - 1` wasted steps per
canvas for steps that never wait on the host (what a captured GPU graph needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BlockParams:
    """Denoising settings shared by every row of a block batch (requests are grouped by them)."""

    canvas: int  # canvas size in tokens
    steps: int  # max denoising steps per canvas
    t_min: float  # temperature at the last step
    t_max: float  # temperature at the first step
    stability_threshold: int  # steps the argmax canvas must stay unchanged to stop early
    confidence_threshold: float  # mean entropy under which a stable canvas stops early
    entropy_bound: float  # entropy-bound sampler budget per step
    seeded: bool = False  # skeleton-seeded canvases (engines.modes.seeded): rows with a skeleton batch apart
    check_every: int = 1  # steps between reads of the stop flags (StopFlags); 1: after every step


def context_length(model) -> int:
    """Positions the model holds, prompt and output together (what `DiffusionEngine.validate` checks)."""
    return model.config.text_config.max_position_embeddings


class StopFlags:
    """The host's view of which rows of a canvas batch are still denoising, refreshed from the
    device's `done` (B,) only at steps `check_every - 1`, `2 * check_every - 1`, ... and never at
    the last step (the loop ends there anyway)."""

    reads_so_far = 0  # every read in this process, for `tandem bench engines --compile-compare` to count

    def __init__(self, batch_size: int, check_every: int):
        assert check_every >= 1, f"check_every must be >= 1, got {check_every}"
        self.check_every = check_every
        self.running: list[bool] = [True] * batch_size  # as of the last read

    def read(self, done: torch.Tensor, step: int, remaining: int) -> bool:
        """After step `step` (0-based) with `remaining` steps counted down to 1: copy `done` to the
        host if this step is a read point. Returns whether it read."""
        if remaining <= 1 or (step + 1) % self.check_every:
            return False
        self.running = (~done).tolist()  # the one host read inside a canvas's steps
        StopFlags.reads_so_far += 1
        return True

    @property
    def all_stopped(self) -> bool:
        return not any(self.running)
