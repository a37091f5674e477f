"""What routing knows of the engines, kept by the gateway: `RoutingView`, the snapshot of two parts.

- the poller (router.decision.engine_poller.EnginePoller): each engine's load every half second, off
  the request path, which is also its health probe (router.decision.engine_health), and the
  engines' cost profile and limits;
- the ledger (router.decision.ledger.Ledger): the requests this gateway has sent (dispatch tickets,
  opened and closed there alone), the work ahead (`Backlog`) and what answered requests taught
  (calibration, overhead, verified's draft share: router.decision.live_costs).

`view()` is the typed snapshot `decide()` reads: an `EngineView` per engine (router.decision.engine_view),
each poll corrected by the ledger's counts since. The gateway's failover asks the view what a dispatch
costs (`dispatch`: a ticket opened in the ledger, priced by the decision's own `Pricing`) and which mode
can take over a failed one in the time left (`takeover_mode`), both by the decision's own policy and
prices; `returned` closes the ticket.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from engines.types import ENGINE_OF_MODE, DecodeStats, GenerationRequest
from router.decision.engine_client import EngineClient
from router.decision.engine_poller import FACTS_TIMEOUT_S, POLL_INTERVAL_S, PROBE_TIMEOUT_S, EnginePoller
from router.decision.engine_view import Engine, EngineView, Ticket, prefix_reuse
from router.decision.features import PromptSize
from router.decision.layouts import SPLIT, EngineViews, Layout
from router.decision.ledger import TASK_EVIDENCE, Ledger
from router.decision.live_costs import IDLE, LoadState
from router.decision.pricing import PriceQuery
from router.decision.types import Decision

__all__ = ["POLL_INTERVAL_S", "PROBE_TIMEOUT_S", "TASK_EVIDENCE", "RoutingView", "request_query"]

log = logging.getLogger("tandem.gateway")


def request_query(gen: GenerationRequest, decision: Decision) -> PriceQuery:
    """What a decided request is priced as at dispatch and failover: the router's p90 under its cap
    (Gateway.answer), its steps and canvas, its prompt, and its decision's draft key."""
    steps = gen.max_denoising_steps or getattr(decision.prices.cost, "steps", 0)
    prompt = PromptSize(decision.prompt_tokens, decision.prefix_tokens)
    return PriceQuery(gen.mode, gen.expected_tokens or 1, steps, gen.canvas, decision.task, prompt, decision.draft_key.agrees)


class RoutingView:
    """Loads, queues, in-flight counts, backlog and calibration of the engines behind one gateway.

    `engines` maps an engine name ("block", "ar"; "shared") to its `EngineClient`, and `layout`
    says which modes each serves (router.decision.layouts); `telemetry` (optional) gets each poll's
    queue ratios as the queue-depth gauge; `clock` (seconds, monotonic) times the requests it sees
    dispatched and returned, and the work ahead: a test passes a clock it advances itself."""

    def __init__(self, engines: dict[Engine, EngineClient], telemetry=None, poll_interval_s: float = POLL_INTERVAL_S,
                 probe_timeout_s: float = PROBE_TIMEOUT_S, facts_timeout_s: float = FACTS_TIMEOUT_S, layout: Layout = SPLIT,
                 clock: Callable[[], float] = time.monotonic):
        self.engines, self.clock, self.layout, self.telemetry = engines, clock, layout, telemetry
        # Engines serving block and AR (the shared layout's): their view carries each mode's requests, step times and the
        # tokens lane's work ahead, and pricing counts the turns the other lane takes there (router.decision.pricing.turns_ms).
        self.interleaved = {e for e in engines if len({ENGINE_OF_MODE[m] for m in layout.modes(e)}) > 1}
        self.ledger = Ledger(engines, layout, self.interleaved, clock)
        self.poller = EnginePoller(engines, layout, self.ledger.polled, self._after_poll, poll_interval_s, probe_timeout_s, facts_timeout_s)
        self.health = self.poller.health

    # ---- the poller's and the ledger's parts, by their old names --------------------------------------

    canvas_limit = property(lambda self: self.poller.canvas_limit)
    prompt_limit = property(lambda self: self.poller.prompt_limit)
    _poller = property(lambda self: self.poller.task)
    backlog = property(lambda self: self.ledger.backlog)
    tokens_work = property(lambda self: self.ledger.tokens_work)
    by_task = property(lambda self: self.ledger.by_task)
    calibration = property(lambda self: self.ledger.calibration)
    overhead = property(lambda self: self.ledger.overhead)
    draft_share = property(lambda self: self.ledger.draft_share)
    answered = property(lambda self: self.ledger.answered)
    _in_flight = property(lambda self: self.ledger.in_flight)

    @property
    def cost(self):
        """The engines' cost profile, as the poller fetched it (a Router prices by it: `Router(costs=view)`)."""
        return self.poller.cost

    @cost.setter
    def cost(self, profile) -> None:
        self.poller.cost = profile

    @property
    def _polled(self):
        return self.poller.polled

    @_polled.setter
    def _polled(self, loads) -> None:
        self.poller.polled = loads

    def start(self) -> None:
        self.poller.start()

    async def ready(self) -> None:
        await self.poller.ready()

    async def _probe(self, name: Engine, handle: EngineClient) -> None:
        await self.poller.probe(name, handle)

    def _after_poll(self) -> None:
        if self.telemetry is not None:
            view = self.view()
            self.telemetry.set_queue_depth({n: v.queue_ratio for n, v in view.items()}, {n: v.running for n, v in view.items()},
                                           {n: v.queued for n, v in view.items()})

    # ---- the view -----------------------------------------------------------------------------------

    def view(self) -> EngineViews:
        """Each polled engine's occupancy: the poll less what finished since, or this gateway's own
        in-flight count when that is higher; the block engine's backlog; each engine's calibration.
        An engine that did not answer its poll, or is down, is unreachable (queue ratio 1.0)."""
        out = EngineViews({}, self.layout)
        canvases, drafts = self.layout.engine("block"), self.layout.engine("verified")  # the engines the backlog and draft shares are of
        for name, load in self.poller.polled.items():
            if load is None or self.health.is_down(name):
                out[name] = EngineView(queue_ratio=1.0, reachable=False)
                continue
            total = self._occupied(name)
            running = min(total, load.capacity)
            state = self.load_state(name)
            shared = name in self.interleaved
            out[name] = EngineView(queued=total - running, running=running, capacity=load.capacity, queue_ratio=load.queue_ratio,
                                   calibration=self.ledger.calibration[(name, state)].factor,
                                   overhead_ms=self.ledger.overhead[(name, state)].ms,
                                   backlog_ms=self.ledger.backlog.ahead_ms(self.clock()) if name == canvases else None,
                                   by_task={(m, t): c.factor for (m, t, at), c in self.ledger.by_task.items()
                                            if self.layout.engine(m) == name and at == state and c.count >= TASK_EVIDENCE},
                                   prefix_reuse=prefix_reuse(load.stats),
                                   draft_share={k: d.share for k, d in self.ledger.draft_share.items() if d.count >= TASK_EVIDENCE} if name == drafts else {},
                                   idle=state == IDLE,
                                   seen=frozenset(m for (m, at), n in self.ledger.answered.items() if self.layout.engine(m) == name and at == state and n),
                                   by_mode={m: n for m in self.layout.modes(name) if (n := self.ledger.mode_occupied(m, load))} if shared else {},
                                   step_ms=dict(self.poller.step_ms[name]) if shared else {}, lanes_apart=shared and load.lane_threads > 1,
                                   tokens_work_ms=self.ledger.tokens_work[name].ahead_ms(self.clock()) if shared else None)
        return out

    def _occupied(self, name: Engine) -> int:
        return self.ledger.occupied(name, self.poller.polled.get(name))

    def load_state(self, name: Engine) -> LoadState:
        return LoadState(busy=self._occupied(name) > 0, others_busy=any(self._occupied(e) > 0 for e in self.engines if e != name))

    # ---- what this gateway sends: tickets, opened and closed in the ledger --------------------------------

    def dispatched(self, gen: GenerationRequest, estimate_ms: float | None, service_ms: float | None, task: str | None = None,
                   reestimate: Callable[[int | None, float], float | None] | None = None, agrees: bool = True) -> Ticket:
        """Open `gen`'s ticket at its engine in the engines' load now (`Ledger.open`)."""
        return self.ledger.open(gen, self.load_state(self.layout.engine(gen.mode)), estimate_ms, service_ms, task, reestimate, agrees)

    def work_of(self, engine: Engine, mode: str):
        return self.ledger.work_of(engine, mode)

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
        """Close `ticket` (`Ledger.close`): `ok` when answered; `stats`, what decoding it cost."""
        self.ledger.close(ticket, ok, stats)

    def snapshot(self) -> dict:
        """For /admin/stats."""
        ledger = self.ledger
        return ledger.snapshot() | {
            "prefix_reuse": {e: round(prefix_reuse(load.stats), 3) for e, load in self.poller.polled.items() if load is not None},
            "draft_share_by_task": {k.label: round(d.share, 3) for k, d in ledger.draft_share.items() if d.count >= TASK_EVIDENCE},
            "answered_by_load": {f"{m} ({state.label})": n for (m, state), n in ledger.answered.items()},
            "step_ms": {e: {m: round(ms, 2) for m, ms in self.poller.step_ms[e].items()} for e in self.interleaved},
            "health": self.health.snapshot()}
