"""What routing knows of the engines, kept by the gateway: `RoutingView`.

It fetches the engines' cost profile (`cost`: the Router prices modes by it, `Router(costs=view)`), polls each
engine's load every half second (off the request path; each poll is also the engine's health probe,
`router.decision.engine_health`), counts the requests this gateway has sent since (a burst routed inside one poll
interval would otherwise all see the same idle engine), prices the work ahead (`Backlog`, `work_of`) and learns
from what comes back (`router.decision.live_costs`):
- the share of verified's tokens its drafts really wrote, per task and agreement (`DraftShare`, by `DraftKey`):
  the profile prices verified from the task suite's acceptance, today's prompts of a task may draft far less;
- how much longer than the cost profile's estimate each engine's own time really is (`Calibration`), overall and
  per mode and task type, apart for each `LoadState` (idle, busy, the other engine busy), each request compared
  with its estimate redone for what it wrote (a task's own factor: at the predicted length, `Ticket.reestimate`);
- the per-request overhead outside the engine (`Overhead`), added to estimates, not scaled.
`decide()` reads one typed snapshot of all that: an `EngineView` per engine (router.decision.engine_view). The
gateway's failover asks it what a dispatch costs (`dispatch`) and which mode can take over a failed one in the
time left (`takeover_mode`), both by the decision's own policy and prices.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace

from engines.cost import CostProfile
from engines.prompt_bounds import PromptLimit
from engines.types import ENGINE_OF_MODE, LANE_OF_MODE, DecodeStats, EngineLoad, GenerationRequest
from router.decision.engine_client import EngineClient
from router.decision.engine_health import EngineHealth, replica_died
from router.decision.engine_view import Engine, EngineView, Ticket, prefix_reuse, step_ms
from router.decision.features import PromptSize
from router.decision.layouts import SPLIT, EngineViews, Layout
from router.decision.live_costs import IDLE, Backlog, Calibration, DraftKey, DraftShare, LoadState, Overhead
from router.decision.pricing import PriceQuery
from router.decision.types import Decision

log = logging.getLogger("tandem.gateway")


def request_query(gen: GenerationRequest, decision: Decision) -> PriceQuery:
    """What a decided request is priced as at dispatch and failover: the router's p90 under its cap
    (Gateway.answer), its steps and canvas, its prompt, and its decision's draft key."""
    steps = gen.max_denoising_steps or getattr(decision.prices.cost, "steps", 0)
    prompt = PromptSize(decision.prompt_tokens, decision.prefix_tokens)
    return PriceQuery(gen.mode, gen.expected_tokens or 1, steps, gen.canvas, decision.task, prompt, decision.draft_key.agrees)

POLL_INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 1.0  # a load poll that takes longer failed (router.decision.engine_health counts it)
FIRST_POLL_WAIT_S = 1.0  # how long the first requests at a fresh replica wait for a view
FACTS_TIMEOUT_S = 5.0  # the engines' cost profile and limits: asked until they answer within this
TASK_EVIDENCE = 3  # finished requests of a (mode, task) before its own calibration is used


class RoutingView:
    """Loads, queues, in-flight counts, backlog and calibration of the engines behind one gateway.

    `engines` maps an engine name ("block", "ar"; "shared") to its `EngineClient`, and `layout`
    says which modes each serves (router.decision.layouts); `telemetry` (optional) gets each poll's
    queue ratios as the queue-depth gauge; `clock` (seconds, monotonic) times the requests it sees
    dispatched and returned, and the work ahead: a test passes a clock it advances itself."""

    def __init__(self, engines: dict[Engine, EngineClient], telemetry=None, poll_interval_s: float = POLL_INTERVAL_S,
                 probe_timeout_s: float = PROBE_TIMEOUT_S, facts_timeout_s: float = FACTS_TIMEOUT_S, layout: Layout = SPLIT,
                 clock: Callable[[], float] = time.monotonic):
        self.engines = engines
        self.clock = clock
        self.layout = layout
        self.poll_interval_s, self.probe_timeout_s, self.facts_timeout_s = poll_interval_s, probe_timeout_s, facts_timeout_s
        self.health = EngineHealth(engines)
        self.telemetry = telemetry
        self.cost: CostProfile | None = None  # the checkpoint's cost profile, fetched with the first poll (the Router prices by it)
        self.canvas_limit: int | None = None  # the checkpoint's canvas_length
        self.prompt_limit: PromptLimit | None = None  # its context and tokens' longest spelling: the gateway's cheap length check
        self._polled: dict[Engine, EngineLoad | None] = {}  # last poll; None: did not answer
        self._in_flight: dict[Engine, int] = {e: 0 for e in engines}  # requests this gateway has there now
        self._finished_since_poll: dict[Engine, int] = {e: 0 for e in engines}  # the poll may count them
        self.backlog = Backlog()  # estimated work ahead of the block engine
        # Engines serving block and AR (the shared layout's): their view carries each mode's requests, step times and the
        # tokens lane's work ahead, and pricing counts the turns the other lane takes there (router.decision.pricing.turns_ms).
        self.interleaved = {e for e in engines if len({ENGINE_OF_MODE[m] for m in layout.modes(e)}) > 1}
        self.tokens_work: dict[Engine, Backlog] = defaultdict(lambda: Backlog(batched=True))  # verified's and AR's rows share steps
        self._mode_in_flight: dict[str, int] = defaultdict(int)  # requests of each mode this gateway has at its engine now
        self._mode_finished_since_poll: dict[str, int] = defaultdict(int)
        self._step_ms: dict[Engine, dict[str, float]] = defaultdict(dict)  # mode -> ms per step lately, from the polls' counters
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
        self._poller: asyncio.Task | None = None
        self._first_poll: asyncio.Event | None = None

    # ---- polling ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start polling (idempotent; restarts a poller that died)."""
        if self._first_poll is None:
            self._first_poll = asyncio.Event()
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())

    async def ready(self) -> None:
        """The first requests wait (at most FIRST_POLL_WAIT_S) for the cost profile and a first
        poll, so a burst at a fresh replica is routed by cost and counted in the backlog too."""
        self.start()
        if not self._first_poll.is_set():
            try:
                await asyncio.wait_for(self._first_poll.wait(), timeout=FIRST_POLL_WAIT_S)
            except asyncio.TimeoutError:
                pass

    async def _poll(self) -> None:
        engine_facts = False  # whether the engines have answered for their cost profile and limits
        while True:
            if not engine_facts:  # asked again at every tick until they answer: a busy engine at start is not "none"
                engine_facts = await self._fetch_engine_facts()
            self.health.wake.clear()
            await asyncio.gather(*(self._probe(name, handle) for name, handle in self.engines.items()))
            if self.telemetry is not None:
                view = self.view()
                self.telemetry.set_queue_depth({n: v.queue_ratio for n, v in view.items()}, {n: v.running for n, v in view.items()},
                                               {n: v.queued for n, v in view.items()})
            self._first_poll.set()
            try:  # the next tick, or at once when a call has just seen an engine die
                await asyncio.wait_for(self.health.wake.wait(), timeout=self.poll_interval_s)
            except asyncio.TimeoutError:
                pass

    async def _fetch_engine_facts(self) -> bool:
        """The engines' cost profile (None when they have none: cost-aware routing is then off) and their
        canvas and prompt limits. Returns whether both answered."""
        try:
            self.cost = await asyncio.wait_for(self.engines[self.layout.engine("block")].cost_profile(), timeout=self.facts_timeout_s)
            if self.cost is None:
                log.warning("the engines have no cost profile: cost-aware routing stays off")
        except Exception:
            log.warning("no answer from the engines for their cost profile yet: asked again at the next poll")
            return False
        try:
            info = await asyncio.wait_for(self.engines[self.layout.engine("block")].info(), timeout=self.facts_timeout_s)
            self.canvas_limit = info.canvas_length
            self.prompt_limit = PromptLimit(info.context_length, info.max_chars_per_token)
        except Exception:
            return False  # the engine itself refuses an oversized canvas meanwhile
        return True

    async def _probe(self, name: Engine, handle: EngineClient) -> None:
        """One load poll of one engine, which is also its health probe. A failed one is a busy
        engine unless Ray says its replicas died (router.decision.engine_health)."""
        try:
            before = self._polled.get(name)
            load = self._polled[name] = await asyncio.wait_for(handle.load(), timeout=self.probe_timeout_s)
            self._finished_since_poll[name] = 0
            for mode in self.layout.modes(name):
                self._mode_finished_since_poll[mode] = 0
            self._step_ms[name] |= step_ms(before.stats if before is not None else None, load.stats)
            self.health.answered_by(name, load.replica)
            self.health.probed(name, ok=True)
        except Exception as exc:
            self._polled[name] = None
            if replica_died(exc) or await self.health.replicas_gone(name, self.probe_timeout_s):
                self.health.died(name)
            self.health.probed(name, ok=False)

    # ---- the view -----------------------------------------------------------------------------------

    def view(self) -> EngineViews:
        """Each polled engine's occupancy: the poll less what finished since, or this gateway's own
        in-flight count when that is higher; the block engine's backlog; each engine's calibration.
        An engine that did not answer its poll, or is down, is unreachable (queue ratio 1.0)."""
        out = EngineViews({}, self.layout)
        canvases, drafts = self.layout.engine("block"), self.layout.engine("verified")  # the engines the backlog and draft shares are of
        for name, load in self._polled.items():
            if load is None or self.health.is_down(name):
                out[name] = EngineView(queue_ratio=1.0, reachable=False)
                continue
            total = self._occupied(name)
            running = min(total, load.capacity)
            state = self.load_state(name)
            shared = name in self.interleaved
            out[name] = EngineView(queued=total - running, running=running, capacity=load.capacity, queue_ratio=load.queue_ratio,
                                   calibration=self.calibration[(name, state)].factor,
                                   overhead_ms=self.overhead[(name, state)].ms,
                                   backlog_ms=self.backlog.ahead_ms(self.clock()) if name == canvases else None,
                                   by_task={(m, t): c.factor for (m, t, at), c in self.by_task.items()
                                            if self.layout.engine(m) == name and at == state and c.count >= TASK_EVIDENCE},
                                   prefix_reuse=prefix_reuse(load.stats),
                                   draft_share={k: d.share for k, d in self.draft_share.items() if d.count >= TASK_EVIDENCE} if name == drafts else {},
                                   idle=state == IDLE,
                                   seen=frozenset(m for (m, at), n in self.answered.items() if self.layout.engine(m) == name and at == state and n),
                                   by_mode={m: n for m in self.layout.modes(name) if (n := self._mode_occupied(m, load))} if shared else {},
                                   step_ms=dict(self._step_ms[name]) if shared else {}, lanes_apart=shared and load.lane_threads > 1,
                                   tokens_work_ms=self.tokens_work[name].ahead_ms(self.clock()) if shared else None)
        return out

    def _mode_occupied(self, mode: str, load: EngineLoad) -> int:
        """Requests of `mode` at its engine now, counted as `_occupied` counts an engine's."""
        polled = max(0, load.by_mode.get(mode, 0) - self._mode_finished_since_poll[mode])
        return max(polled, self._mode_in_flight[mode])

    def _occupied(self, name: Engine) -> int:
        """Requests at an engine: its last poll less what finished since, or this gateway's in-flight count if higher."""
        load = self._polled.get(name)
        polled = max(0, load.queued + load.running - self._finished_since_poll[name]) if load is not None else 0
        return max(polled, self._in_flight[name])

    def load_state(self, name: Engine) -> LoadState:
        return LoadState(busy=self._occupied(name) > 0, others_busy=any(self._occupied(e) > 0 for e in self.engines if e != name))

    # ---- what this gateway sends ----------------------------------------------------------------------

    def dispatched(self, gen: GenerationRequest, estimate_ms: float | None, service_ms: float | None, task: str | None = None,
                   reestimate: Callable[[int | None, float], float | None] | None = None, agrees: bool = True) -> Ticket:
        """Count `gen` at its engine, with the cost profile's estimate of its finish (calibrated
        against what happens, for its engine and for its mode and `task`; `reestimate` redoes it for
        the tokens really written, see `Ticket`) and, on the block engine, its own work in the backlog.
        `agrees`: the agreement head expected block to answer as AR (a `DraftKey`'s half)."""
        engine = self.layout.engine(gen.mode)
        ticket = Ticket(engine, self.clock(), mode=gen.mode, task=task, estimate_ms=estimate_ms, reestimate=reestimate,
                        load=self.load_state(engine), agrees=agrees)
        if (work := self.work_of(engine, gen.mode)) is not None and service_ms is not None:
            ticket.backlog_end = work.add(service_ms, ticket.started)
        self._in_flight[engine] += 1
        self._mode_in_flight[gen.mode] += 1
        return ticket

    def work_of(self, engine: Engine, mode: str) -> Backlog | None:
        """The work ahead a `mode` request joins: its lane's on a shared replica (canvas backlog or tokens work);
        elsewhere the block engine's backlog (block and verified: one serial server), or none (AR: priced by its batch)."""
        if engine in self.interleaved:
            return self.backlog if LANE_OF_MODE[mode] == "canvas" else self.tokens_work[engine]
        return self.backlog if ENGINE_OF_MODE[mode] == "block" else None

    def dispatch(self, gen: GenerationRequest, decision: Decision) -> Ticket:
        """`dispatched`, priced by the prices `decision` was routed by and counted under its draft key."""
        prices, key, estimate, service, reestimate = decision.prices, decision.draft_key, None, None, None
        if prices.cost is not None:
            query = request_query(gen, decision)
            view = self.view()
            estimate = prices.finish_estimate(query, view)
            service = prices.service_ms(query, view.get(self.layout.engine(gen.mode)))

            def reestimate(written: int | None, drafted_share: float) -> float | None:
                length = query.tokens if written is None else max(1, written)
                return prices.finish_estimate(replace(query, tokens=length, draft_share=drafted_share), view)

        return self.dispatched(gen, estimate, service, task=decision.task, reestimate=reestimate, agrees=key.agrees)

    def takeover_mode(self, mode: str, gen: GenerationRequest, decision: Decision, left_ms: float) -> str | None:
        """The mode that retries a request whose `mode` failed: the on_engine_failure mode of the policy
        that routed it, if that engine is up and the decision's prices (calibrated) expect it to
        finish in the `left_ms` left; else None (a 503)."""
        alt = decision.policy.on_engine_failure.get(mode)  # the policy that routed the request, not a newer one
        if alt is None or self.health.is_down(self.layout.engine(alt)) or left_ms <= 0:  # <= 0: the first try used the deadline
            return None
        view, prices = self.view(), decision.prices
        estimate = prices.finish_estimate(replace(request_query(gen, decision), mode=alt), view)
        if estimate is not None and (estimate := view[self.layout.engine(alt)].priced(alt, decision.task, estimate)) > left_ms:
            log.info("request %s: %s cannot finish in the %.0f ms left (est. %.0f ms); no failover", gen.request_id, alt, left_ms, estimate)
            return None
        return alt

    def returned(self, ticket: Ticket, ok: bool, stats: DecodeStats | None = None) -> None:
        """`ticket`'s request is back (`ok`: answered); `stats`: what decoding it cost (its tokens,
        its drafts' share, the engine's own time), read for calibration and verified's draft share."""
        now = self.clock()
        self._in_flight[ticket.engine] -= 1
        self._finished_since_poll[ticket.engine] += 1
        self._mode_in_flight[ticket.mode] -= 1
        self._mode_finished_since_poll[ticket.mode] += 1
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
        """For /admin/stats."""
        return {"calibration": {e: round(self.calibration[(e, IDLE)].factor, 3) for e in self.engines},
                "overhead_ms": {f"{e} ({state.label})": round(o.ms, 1) for (e, state), o in self.overhead.items() if o.count},
                "calibration_by_load": {f"{e} ({state.label})": round(c.factor, 3) for (e, state), c in self.calibration.items() if c.count},
                "calibration_by_task": {f"{m}/{t}" + ("" if state == IDLE else f" ({state.label})"): round(c.factor, 3)
                                        for (m, t, state), c in self.by_task.items() if c.count >= TASK_EVIDENCE},
                "block_backlog_ms": round(self.backlog.ahead_ms(self.clock()), 1), "in_flight": dict(self._in_flight),
                "prefix_reuse": {e: round(prefix_reuse(load.stats), 3) for e, load in self._polled.items() if load is not None},
                "draft_share_by_task": {k.label: round(d.share, 3) for k, d in self.draft_share.items() if d.count >= TASK_EVIDENCE},
                "answered_by_load": {f"{m} ({state.label})": n for (m, state), n in self.answered.items()},
                "step_ms": {e: {m: round(ms, 2) for m, ms in self._step_ms[e].items()} for e in self.interleaved},
                "health": self.health.snapshot()}
