"""Facts every floor shares, defined once: the shipped checkpoint, the canvas sizes, the answer
budget when a request names none, and the scheduler's batch and queue sizes, the prefix cache's size.

`policies/` (canvas sizes in the default policy), `router/` (the API's default `max_tokens`, the
app's engine arguments) and the offline tools import these rather than restating them."""

from __future__ import annotations

import os
from pathlib import Path

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
SHIPPED_CHECKPOINT = CHECKPOINTS / "tandem-tiny"  # the project's own tiny DiffusionGemma: fast tests, TANDEM_CHECKPOINT=tiny
DEFAULT_CHECKPOINT = "gemma3-270m"  # the embedded default: Gemma 3 270M imported at first use, with our adapters
# Checkpoint names an engine resolves (engines.model.loading.resolve_checkpoint); anything else is a directory.
CHECKPOINT_NAMES = ("gemma3-270m", "tiny")
CANVAS_SIZES: tuple[int, ...] = (64, 128, 256)  # right-sized canvases; the largest is the model's canvas_length
DEFAULT_MAX_TOKENS = 512  # output tokens when a request sets no max_tokens
MAX_BATCH_SIZE = 8  # rows one engine replica decodes together per step
MAX_QUEUE = 64  # requests waiting per replica beyond the running batch before 429
MAX_WAIT_S = 0.5  # how long an incompatible request waits before running batches stop admitting
MIN_PREFIX_TOKENS = 64  # shorter prompt heads cost less to encode than to look up and copy (engines.batch.prefix_cache)
PREFIX_CACHE_TOKENS = 32_768  # prompt-head tokens whose KV one replica keeps for reuse (engines.batch.prefix_cache)


def default_checkpoint() -> str:
    """The checkpoint an engine loads when none is named: $TANDEM_CHECKPOINT, else the embedded default."""
    return os.environ.get("TANDEM_CHECKPOINT") or DEFAULT_CHECKPOINT
