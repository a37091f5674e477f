"""What the gateway keeps of each request it answers: the `Outcome` (router.gateway.outcome), built
once and read by /admin/stats (`GatewayStats`), the console's feed (`DecisionFeed`), the metrics
(`Telemetry`) and, off the request path, shadow verification and the Redis decisions log; and
every error a client gets, counted the same way (with its decision, once it was routed).

The gateway's orchestration and its replies hand requests here and go on: nothing here changes an
answer, and the work after an answer (the shadow check, the log write) runs as background tasks
kept referenced until done.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

from engines.types import GenerationRequest, GenerationResult
from router.decision.engine_client import EngineClient
from router.gateway.calls import Call
from router.gateway.decision_feed import DecisionFeed
from router.gateway.outcome import Attempt, Outcome


class Records:
    """The records of one Gateway: its `stats` (GatewayStats), `feed`, `telemetry`, the Redis client
    of its decisions log (`redis`: None, no log) with its `settings` and `stream` key, and the
    engine that serves block mode (`shadow_engine`: it checks block answers against AR's choice,
    bounded by `timeout_s`)."""

    def __init__(self, stats, feed: DecisionFeed, telemetry, redis, settings, stream: str, shadow_engine: EngineClient | None,
                 timeout_s: float):
        self.stats, self.feed, self.telemetry = stats, feed, telemetry
        self.redis, self.settings, self.stream = redis, settings, stream
        self.shadow_engine, self.timeout_s = shadow_engine, timeout_s
        self._background: set[asyncio.Task] = set()

    def answered(self, call: Call, attempt: Attempt, result: GenerationResult) -> None:
        """The answered request's Outcome, built once, to stats, the feed, metrics, and (off the
        request path) shadow verification and the decisions log."""
        outcome, decision = Outcome.of(attempt, result, call.stream), attempt.decision
        self.stats.record(outcome)
        self.feed.record(outcome, decision)
        self.telemetry.record(outcome, decision, prompt_tokens=result.stats.prompt_tokens, first_token_at=attempt.first_token_at,
                              finished_at=time.perf_counter())
        shadow = decision.shadow_verify and outcome.mode == "block"
        if shadow or self.redis is not None:
            self._spawn(self._after(call.route, attempt, result.checked_ids, outcome, shadow))

    def error(self, status: int, code: str | None = None, decision=None, mode: str | None = None, started: float | None = None) -> None:
        """An answered error: /admin/stats, the metrics (requests by what is known of its route, and its
        latency from `started`, time.perf_counter() at arrival) and (with a decision: it was routed) the feed."""
        self.stats.error(status)
        latency_s = None if started is None else time.perf_counter() - started
        self.telemetry.error(status, latency_s, mode=mode or (decision.mode if decision is not None else None), decision=decision)
        if decision is not None:
            self.feed.error(decision, mode or decision.mode, status, code)

    async def _after(self, route, attempt: Attempt, answer_ids: list[int], outcome: Outcome, shadow: bool) -> None:
        """Off the request path: shadow-verify a block answer, then log the decision with its outcome
        (the agreement included: retraining learns from it where block's answers differ from AR's)."""
        if shadow:
            accepted = await self._shadow_verify(attempt.request, answer_ids)
            if accepted is not None:
                outcome = dataclasses.replace(outcome, shadow_agreement=round(accepted / len(answer_ids), 4))
        if self.redis is not None:
            await asyncio.to_thread(self.log_decision, route, attempt.decision, outcome)

    def _spawn(self, coroutine) -> None:
        """Fire-and-forget work off the request path, kept referenced until done."""
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _shadow_verify(self, gen: GenerationRequest, answer_ids: list[int]) -> int | None:
        """How many leading tokens of a block answer the model's AR choice accepts (the policy's
        shadow_verify_rate): one encoder pass over prompt + answer, as verified mode's commit pass
        would do; the client already has its answer. None when it could not be checked."""
        if not answer_ids or self.shadow_engine is None:
            return None
        try:
            accepted = await asyncio.wait_for(self.shadow_engine.agreement(gen, answer_ids), timeout=self.timeout_s)
        except Exception:
            return None
        self.stats.shadow(len(answer_ids), accepted)
        self.telemetry.acceptance.record(accepted / len(answer_ids), {"mode": "block", "shadow": True})
        return accepted

    def log_decision(self, route, decision, outcome: Outcome) -> None:
        """One decisions-log entry (router.gateway.decisions_log): what routing read, the decision and its outcome."""
        from router.gateway.decision_entry import request_features
        from router.gateway.decisions_log import log_decision

        if not log_decision(self.redis, request_features(route), decision.model_dump(mode="json"), outcome.record(), self.settings,
                            stream=self.stream):
            self.telemetry.decisions_dropped.add(1)
