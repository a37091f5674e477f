"""The engines' load poll, which is also their health probe: `EnginePoller`.

Off the request path, every half second, it asks each engine for its load (`EngineLoad`) and, until
they answer, the checkpoint's cost profile and limits (canvas length, prompt limit). A poll that
fails is a busy engine unless Ray says its replicas died (router.decision.engine_health). What it
learns it keeps for the routing view's snapshot (router.decision.routing_view): each engine's last
load (None: did not answer) and the ms per decode step of each mode between two polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable

from engines.cost import CostProfile
from engines.prompt_bounds import PromptLimit
from engines.types import EngineLoad
from router.decision.engine_client import EngineClient
from router.decision.engine_health import EngineHealth, replica_died
from router.decision.engine_view import Engine, step_ms
from router.decision.layouts import Layout

log = logging.getLogger("tandem.gateway")

POLL_INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 1.0  # a load poll that takes longer failed (router.decision.engine_health counts it)
FIRST_POLL_WAIT_S = 1.0  # how long the first requests at a fresh replica wait for a view
FACTS_TIMEOUT_S = 5.0  # the engines' cost profile and limits: asked until they answer within this


class EnginePoller:
    """Polls `engines` (name -> `EngineClient`) of `layout`; `answered(name)` runs after each poll an
    engine answers, `after_poll()` after each round."""

    def __init__(self, engines: dict[Engine, EngineClient], layout: Layout, answered: Callable[[Engine], None],
                 after_poll: Callable[[], None], poll_interval_s: float = POLL_INTERVAL_S, probe_timeout_s: float = PROBE_TIMEOUT_S,
                 facts_timeout_s: float = FACTS_TIMEOUT_S):
        self.engines, self.layout, self.answered, self.after_poll = engines, layout, answered, after_poll
        self.poll_interval_s, self.probe_timeout_s, self.facts_timeout_s = poll_interval_s, probe_timeout_s, facts_timeout_s
        self.health = EngineHealth(engines)
        self.cost: CostProfile | None = None  # the checkpoint's cost profile, fetched with the first poll (decisions price by it)
        self.canvas_limit: int | None = None  # the checkpoint's canvas_length
        self.prompt_limit: PromptLimit | None = None  # its context and tokens' longest spelling: the gateway's cheap length check
        self.polled: dict[Engine, EngineLoad | None] = {}  # last poll; None: did not answer
        self.step_ms: dict[Engine, dict[str, float]] = defaultdict(dict)  # mode -> ms per step lately, from the polls' counters
        self.task: asyncio.Task | None = None
        self.first_poll: asyncio.Event | None = None

    def start(self) -> None:
        """Start polling (idempotent; restarts a poller that died)."""
        if self.first_poll is None:
            self.first_poll = asyncio.Event()
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._poll())

    async def ready(self) -> None:
        """The first requests wait (at most FIRST_POLL_WAIT_S) for the cost profile and a first
        poll, so a burst at a fresh replica is routed by cost and counted in the backlog too."""
        self.start()
        if not self.first_poll.is_set():
            try:
                await asyncio.wait_for(self.first_poll.wait(), timeout=FIRST_POLL_WAIT_S)
            except asyncio.TimeoutError:
                pass

    async def _poll(self) -> None:
        engine_facts = False  # whether the engines have answered for their cost profile and limits
        while True:
            if not engine_facts:  # asked again at every tick until they answer: a busy engine at start is not "none"
                engine_facts = await self._fetch_engine_facts()
            self.health.wake.clear()
            await asyncio.gather(*(self.probe(name, handle) for name, handle in self.engines.items()))
            self.after_poll()
            self.first_poll.set()
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

    async def probe(self, name: Engine, handle: EngineClient) -> None:
        """One load poll of one engine, which is also its health probe. A failed one is a busy
        engine unless Ray says its replicas died (router.decision.engine_health)."""
        try:
            before = self.polled.get(name)
            load = self.polled[name] = await asyncio.wait_for(handle.load(), timeout=self.probe_timeout_s)
            self.answered(name)
            self.step_ms[name] |= step_ms(before.stats if before is not None else None, load.stats)
            self.health.answered_by(name, load.replica)
            self.health.probed(name, ok=True)
        except Exception as exc:
            self.polled[name] = None
            if replica_died(exc) or await self.health.replicas_gone(name, self.probe_timeout_s):
                self.health.died(name)
            self.health.probed(name, ok=False)
