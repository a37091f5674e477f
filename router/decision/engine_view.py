"""What routing knows of one engine now (`EngineView`, the routing view's snapshot that
`Router.decide` and the rules read) and of one request at an engine (`Ticket`, what the routing
view counts from dispatch to answer). Kept by `router.decision.routing_view.RoutingView`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from router.decision.live_costs import IDLE, DraftKey, LoadState

Engine = str  # an engine's name in the app's layout: "block", "ar" or "shared" (router.decision.layouts)


@dataclass(frozen=True)
class EngineView:
    """One engine as routing sees it now."""

    queued: int = 0  # requests waiting for a batch slot
    running: int = 0  # rows decoding
    capacity: int = 1  # rows one step decodes together
    queue_ratio: float = 0.0  # queued / max_queue; 1.0 for an engine that did not answer its poll
    calibration: float = 1.0  # observed / estimated time of its recent requests sent in its present `LoadState`
    backlog_ms: float | None = None  # block engine: estimated work ahead of a new request
    reachable: bool = True  # answered its last poll
    # (mode, task) -> observed / estimated time of that mode's recent requests of that task sent at
    # its present load, once there are enough of them (TASK_EVIDENCE); it replaces `calibration` for such requests
    by_task: dict[tuple[str, str], float] = field(default_factory=dict)
    prefix_reuse: float = 0.0  # share of looked-up prefix tokens its prefix cache served (engines.batch.prefix_cache)
    # block engine: DraftKey (task, block expected to agree) -> share of verified's output tokens its
    # drafts wrote lately, once there are enough requests (TASK_EVIDENCE); the cost model prices
    # verified by it (engines.cost.decode_ms)
    draft_share: dict[DraftKey, float] = field(default_factory=dict)
    overhead_ms: float = 0.0  # what a request spends outside the engine's queue and decode (HTTP hop, chat template, tokenizer)
    # Whether its present `LoadState` is IDLE (the load the cost profile was measured at), and the
    # modes it has answered requests of in its present state: under load a move to another mode
    # waits for evidence of what that mode costs there (`Router.faster_at_equal_quality`).
    idle: bool = True
    seen: frozenset[str] = frozenset()
    # An engine that serves canvas modes and AR at once (the shared layout): its scheduler gives the
    # modes with work equal turns at one decode thread, a step at a time (engines.replica.lanes.pick), so
    # a request there waits for the other kind's steps too (`router.decision.pricing.turns_ms`).
    # Empty on an engine of one kind of work (the split layout), whose prices stay as they were.
    by_mode: dict[str, int] = field(default_factory=dict)  # mode -> its requests there now, waiting or decoding
    step_ms: dict[str, float] = field(default_factory=dict)  # mode -> ms per decode step there lately, measured under the present mix
    lanes_apart: bool = False  # each lane decodes on a thread of its own (engines.replica.scheduler lane_threads 2): no turns taken
    tokens_work_ms: float | None = None  # the tokens lane's work ahead there (AR, verified): the end of its longest request this gateway has in flight

    def factor(self, mode: str, task: str | None) -> float:
        """How much longer than the cost profile's estimate a `mode` request of `task` takes in the engine."""
        return self.by_task.get((mode, task), self.calibration) if task else self.calibration

    def priced(self, mode: str, task: str | None, estimate_ms: float) -> float:
        """A cost-profile estimate made real: calibrated, plus the per-request overhead. The overhead is
        the same in every mode, so a 2-step label's estimate is not scaled by it (a factor learned on
        a 10 ms estimate that took 30 ms would triple a 30 ms one)."""
        return estimate_ms * self.factor(mode, task) + self.overhead_ms


def prefix_reuse(stats: dict) -> float:
    """An engine's prefix-cache reuse so far: reused / looked-up prefix tokens (0 with no cache or no lookups)."""
    cache = (stats or {}).get("prefix_cache") or {}
    looked_up = cache.get("looked_up_tokens", 0)
    return cache.get("reused_tokens", 0) / looked_up if looked_up else 0.0


def step_ms(before: dict | None, now: dict) -> dict[str, float]:
    """Milliseconds per decode step of each mode between two load polls' scheduler counters (`steps`,
    `decode_s`: engines.replica.scheduler.SchedulerStats), for the modes that stepped in between (with no
    earlier poll: since the replica started)."""
    steps, seconds = now.get("steps") or {}, now.get("decode_s") or {}
    steps0, seconds0 = (before or {}).get("steps") or {}, (before or {}).get("decode_s") or {}
    return {m: 1000.0 * (seconds.get(m, 0.0) - seconds0.get(m, 0.0)) / (n - steps0.get(m, 0))
            for m, n in steps.items() if n > steps0.get(m, 0)}


@dataclass
class Ticket:
    """A request at an engine, as the routing view counts it."""

    engine: Engine
    started: float  # time.monotonic() at dispatch
    mode: str = ""  # the mode it was sent in
    task: str | None = None  # the router's task type for it
    estimate_ms: float | None = None  # the cost profile's finish estimate then (uncalibrated)
    backlog_end: float | None = None  # its place in its work ahead (`RoutingView.work_of`: the canvas backlog or a shared replica's tokens work)
    load: LoadState = IDLE  # the engines' load at dispatch: it is calibrated with the requests sent in the same state
    agrees: bool = True  # the agreement head expected block to answer as AR (verified's draft share is kept apart by it)
    # `reestimate(tokens, share)`: the same estimate redone for a length (None: the predicted one)
    # and the share of the tokens drafts wrote. The engine's calibration compares what the request
    # took with it redone for the tokens it really wrote and its drafts' real share, so a length the
    # router mispredicted or drafts that missed are not read as the engine being slow (they are
    # priced apart). A (mode, task)'s own calibration compares with it redone at the predicted
    # length: a task's lengths are mispredicted the same way every time (a label's p90 is 4 tokens,
    # it writes 1), and AR's cost follows the length where block's follows the canvas, so only that
    # makes the task's estimates in two modes comparable. Both take the drafts' real share: an
    # estimate made before the task's share was known (priced by the suite's acceptance, 10x off
    # for writing) would leave its factor meaningless once it is.
    reestimate: Callable[[int | None, float], float | None] | None = None
