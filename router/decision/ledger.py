"""The ledger of what one gateway has sent its engines: dispatch tickets opened and closed here alone.

`open` counts a request at its engine (a `Ticket`: engine, mode, task, its finish estimate, its place
in the work ahead) and `close` counts it back when it is answered or abandoned, learning from what came
back (`router.decision.live_costs`): how much longer than the cost profile's estimate each engine
really takes (`Calibration`, per `LoadState`, and per mode and task), the per-request overhead outside
the engine (`Overhead`), the share of verified's tokens its drafts wrote (`DraftShare`, by `DraftKey`).
Between two load polls the ledger's counts correct the poll (`occupied`): a burst routed inside one
poll interval would otherwise all see the same idle engine. The routing view
(router.decision.routing_view) reads it into its snapshot; the poller (router.decision.engine_poller)
tells it when an engine's poll answered (`polled`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from engines.types import ENGINE_OF_MODE, LANE_OF_MODE, DecodeStats, EngineLoad, GenerationRequest
from router.decision.engine_view import Engine, Ticket
from router.decision.layouts import Layout
from router.decision.live_costs import IDLE, Backlog, Calibration, DraftKey, DraftShare, LoadState, Overhead

TASK_EVIDENCE = 3  # finished requests of a (mode, task) before its own calibration is used


class Ledger:
    """In-flight counts, work ahead and what answered requests taught, for the engines of one `layout`.
    `clock` (seconds, monotonic) times the tickets; `interleaved`: the engines serving both lanes."""

    def __init__(self, engines, layout: Layout, interleaved: set[Engine], clock: Callable[[], float]):
        self.layout, self.interleaved, self.clock = layout, interleaved, clock
        self.in_flight: dict[Engine, int] = {e: 0 for e in engines}  # requests this gateway has there now
        self.finished_since_poll: dict[Engine, int] = {e: 0 for e in engines}  # the poll may count them
        self.mode_in_flight: dict[str, int] = defaultdict(int)  # requests of each mode this gateway has at its engine now
        self.mode_finished_since_poll: dict[str, int] = defaultdict(int)
        self.backlog = Backlog()  # estimated work ahead of the block engine
        self.tokens_work: dict[Engine, Backlog] = defaultdict(lambda: Backlog(batched=True))  # verified's and AR's rows share steps
        # Calibration is kept apart per `LoadState`: the profile prices a lone request on an idle machine well, and a batch,
        # a queue or two engines sharing the cores only roughly; one factor would carry a busy spell's error to the next.
        self.calibration: dict[tuple[Engine, LoadState], Calibration] = defaultdict(Calibration)  # (engine, load) -> its own
        # (mode, task, load) -> its own, at the predicted length; not clamped at 4x (a task whose drafts miss runs
        # 10x over a suite-based estimate) nor at 0.5x (a task whose p90 length is 4x what it writes)
        self.by_task: dict[tuple[str, str, LoadState], Calibration] = defaultdict(lambda: Calibration(low=0.2, high=50.0))
        self.draft_share: dict[DraftKey, DraftShare] = defaultdict(DraftShare)  # verified's drafts' share of its tokens
        # (engine, load) -> a request's time outside the engine's own (dispatch to answer, less what the engine reports)
        self.overhead: dict[tuple[Engine, LoadState], Overhead] = defaultdict(Overhead)
        self.answered: dict[tuple[str, LoadState], int] = defaultdict(int)  # (mode, load at dispatch) -> requests answered

    def polled(self, engine: Engine) -> None:
        """`engine`'s load poll answered: what finished before it, it counts."""
        self.finished_since_poll[engine] = 0
        for mode in self.layout.modes(engine):
            self.mode_finished_since_poll[mode] = 0

    def occupied(self, engine: Engine, load: EngineLoad | None) -> int:
        """Requests at an engine: its last poll less what finished since, or this gateway's in-flight count if higher."""
        polled = max(0, load.queued + load.running - self.finished_since_poll[engine]) if load is not None else 0
        return max(polled, self.in_flight[engine])

    def mode_occupied(self, mode: str, load: EngineLoad) -> int:
        """Requests of `mode` at its engine now, counted as `occupied` counts an engine's."""
        polled = max(0, load.by_mode.get(mode, 0) - self.mode_finished_since_poll[mode])
        return max(polled, self.mode_in_flight[mode])

    def work_of(self, engine: Engine, mode: str) -> Backlog | None:
        """The work ahead a `mode` request joins: its lane's on a shared replica (canvas backlog or tokens work);
        elsewhere the block engine's backlog (block and verified: one serial server), or none (AR: priced by its batch)."""
        if engine in self.interleaved:
            return self.backlog if LANE_OF_MODE[mode] == "canvas" else self.tokens_work[engine]
        return self.backlog if ENGINE_OF_MODE[mode] == "block" else None

    def open(self, gen: GenerationRequest, load: LoadState, estimate_ms: float | None, service_ms: float | None,
             task: str | None = None, reestimate: Callable[[int | None, float], float | None] | None = None,
             agrees: bool = True) -> Ticket:
        """Count `gen` at its engine (in the engines' `load` now), with the cost profile's estimate of its
        finish and, in its lane's work ahead, its own service time (see `Ticket`)."""
        engine = self.layout.engine(gen.mode)
        ticket = Ticket(engine, self.clock(), mode=gen.mode, task=task, estimate_ms=estimate_ms, reestimate=reestimate,
                        load=load, agrees=agrees)
        if (work := self.work_of(engine, gen.mode)) is not None and service_ms is not None:
            ticket.backlog_end = work.add(service_ms, ticket.started)
        self.in_flight[engine] += 1
        self.mode_in_flight[gen.mode] += 1
        return ticket

    def close(self, ticket: Ticket, ok: bool, stats: DecodeStats | None = None) -> None:
        """`ticket`'s request is back (`ok`: answered); `stats`: what decoding it cost (its tokens,
        its drafts' share, the engine's own time), read for calibration and verified's draft share."""
        now = self.clock()
        self.in_flight[ticket.engine] -= 1
        self.finished_since_poll[ticket.engine] += 1
        self.mode_in_flight[ticket.mode] -= 1
        self.mode_finished_since_poll[ticket.mode] += 1
        if ticket.backlog_end is not None and (work := self.work_of(ticket.engine, ticket.mode)) is not None:
            work.done(ticket.backlog_end, now)
        estimate = as_priced = ticket.estimate_ms
        if ok and estimate and stats is not None and stats.output_tokens and ticket.reestimate is not None:
            share = stats.accepted / stats.output_tokens
            estimate, as_priced = ticket.reestimate(stats.output_tokens, share), ticket.reestimate(None, share)
        if ok and estimate:
            observed = (now - ticket.started) * 1000.0
            if stats is not None and stats.latency_s > 0:  # the engine's own time (its queue and decode) is what the profile prices
                engine_ms = min(observed, stats.latency_s * 1000.0)
                self.overhead[(ticket.engine, ticket.load)].observe(observed - engine_ms)
                observed = engine_ms
            self.calibration[(ticket.engine, ticket.load)].observe(observed, estimate)
            self.answered[(ticket.mode, ticket.load)] += 1
            if ticket.task and as_priced:  # at the predicted length (see Ticket.reestimate)
                self.by_task[(ticket.mode, ticket.task, ticket.load)].observe(observed, as_priced)
        if ok and stats is not None and ticket.mode == "verified" and ticket.task and stats.output_tokens:
            self.draft_share[DraftKey(ticket.task, ticket.agrees)].observe(stats.accepted, stats.output_tokens)

    def snapshot(self) -> dict:
        """The ledger's part of /admin/stats."""
        return {"calibration": {e: round(self.calibration[(e, IDLE)].factor, 3) for e in self.in_flight},
                "overhead_ms": {f"{e} ({state.label})": round(o.ms, 1) for (e, state), o in self.overhead.items() if o.count},
                "calibration_by_load": {f"{e} ({state.label})": round(c.factor, 3) for (e, state), c in self.calibration.items() if c.count},
                "calibration_by_task": {f"{m}/{t}" + ("" if state == IDLE else f" ({state.label})"): round(c.factor, 3)
                                        for (m, t, state), c in self.by_task.items() if c.count >= TASK_EVIDENCE},
                "block_backlog_ms": round(self.backlog.ahead_ms(self.clock()), 1), "in_flight": dict(self.in_flight)}
