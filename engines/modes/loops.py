"""The modes' table: a batch's mode (and, for block, whether its canvases are skeleton-seeded) -> its
decode loop, every one `(rows, params, ctx) -> Steps[None]` (engines.decode.loop.Loop).

The replica's engine picks a batch's loop here (`loop_of`) and the scheduler steps it. On a replica
the tokens lane runs `verified_steps` for verified and AR requests alike (engines.replica.scheduler:
AR's rows never draft there); `ar_steps` is AR's own loop, for the rows other loops finish by AR
steps and for the thread-per-request helper (engines.replica.direct).
"""

from __future__ import annotations

from engines.decode.canvas_settings import BlockParams
from engines.decode.loop import Loop, LoopContext
from engines.decode.rows import Row
from engines.decode.steps import Steps
from engines.modes.ar import ar_steps
from engines.modes.block import block_steps
from engines.modes.seeded import decode_seeded
from engines.modes.verified import verified_steps


def seeded_steps(rows: list[Row], params: BlockParams, ctx: LoopContext) -> Steps[None]:
    """Seeded block rows: their canvases as one step (a few passes; newcomers wait for the next
    batch), then what they could not finish under the grammar, by constrained AR steps."""
    unfinished = decode_seeded(ctx.model, rows, params, ctx.pad_id, ctx.seeder)
    if unfinished:
        yield
        yield from ar_steps(unfinished, None, ctx.alone())


LOOPS: dict[str, Loop] = {"block": block_steps, "seeded": seeded_steps, "verified": verified_steps, "ar": ar_steps}


def loop_of(mode: str, params: BlockParams | None) -> Loop:
    """The loop a batch of `mode` rows with denoising settings `params` runs."""
    return LOOPS["seeded" if mode == "block" and params.seeded else mode]
