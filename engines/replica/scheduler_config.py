"""What a replica's scheduler (engines.replica.scheduler) is set to and what it counts: its settings, from the
deployment's engine arguments, and the counters `/admin/stats` and the metrics read."""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.defaults import MAX_BATCH_SIZE, MAX_QUEUE, MAX_WAIT_S


@dataclass
class SchedulerConfig:
    max_batch_size: int = MAX_BATCH_SIZE  # rows decoded together in one forward
    max_queue: int = MAX_QUEUE  # waiting requests beyond the running batch; more are refused with 429
    max_wait_s: float = MAX_WAIT_S  # how long an incompatible request may wait before batches stop admitting
    retry_after_s: float = 1.0  # Retry-After sent with a 429
    # Interleave the modes' batches (None: unless the engine replays CUDA graphs, whose outputs the next
    # replay overwrites while a suspended batch holds them). False: one batch at a time, and a batch
    # stops admitting once a request it cannot take has waited max_wait_s.
    interleave: bool | None = None
    lane_threads: int = 1  # decode threads: 1 steps both lanes in turn, 2 gives each its own (interleaving only)
    canvas_nice: int = 0  # with a thread per lane: how much lower the canvas lane's thread runs in the OS (Linux nice)


@dataclass
class SchedulerStats:
    submitted: int = 0
    completed: int = 0
    rejected: int = 0  # queue full
    cancelled: int = 0
    failed: int = 0
    batches: int = 0  # batches started (one runs per lane at a time)
    admitted_mid_batch: int = 0  # requests that joined a running batch
    # mode -> decode steps that served its rows (engines.decode.steps) and their seconds; a step for two modes counts for each
    steps: dict[str, int] = field(default_factory=dict)
    decode_s: dict[str, float] = field(default_factory=dict)
