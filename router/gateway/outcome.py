"""The typed hand-offs after routing: `Attempt`, what failover (router.gateway.failover) hands back
(where a request was answered, and the answer or its open stream), and `Outcome`, what came of an
answered request, built once (`Outcome.of`) and read by every record of it: /admin/stats
(`GatewayStats.record`), the metrics (`Telemetry.record`), the console's feed and the Redis
decisions log (`record()`, the same fields in both), so they never disagree on a latency or a count."""

from __future__ import annotations

import dataclasses
import time

from engines.errors import TandemError
from engines.types import GenerationRequest, GenerationResult
from router.decision.engine_client import EngineStream
from router.decision.engine_view import Ticket
from router.decision.types import Decision

@dataclasses.dataclass
class Attempt:
    """What failover hands back: where a request was answered, and its answer or open stream."""

    decision: Decision  # the route, with the policy snapshot that made it
    request: GenerationRequest  # what the answering engine was sent (its mode: `mode`)
    mode: str  # the mode that answers: the decided one, or the policy's on_engine_failure mode
    degraded: bool  # the decided mode's engine failed and another mode answers
    ticket: Ticket  # the routing view's record of this dispatch: returned to it when the answer is done
    started: float  # time.perf_counter() when the request arrived: latency counts from it
    timeout_s: float  # the request's deadline (a stream's wait for each item too)
    result: GenerationResult | None = None  # a whole answer
    stream: EngineStream | None = None  # a stream's items after `first`
    first: str | GenerationResult | TandemError | None = None  # a stream's first item (None: it ended at once)
    first_token_at: float | None = None  # time.perf_counter() when a stream's first content token went out

    def headers(self) -> dict[str, str]:
        """Response headers that say where it was answered (beside the decision's own)."""
        return {"x-tandem-mode": self.mode} | ({"x-tandem-degraded": "true"} if self.degraded else {})


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One answered request, as its records keep it (no prompt or answer text)."""

    mode: str  # the mode that answered (the decided one, or failover's)
    degraded: bool  # the decided mode's engine failed and another mode answered
    stream: bool  # answered as server-sent events
    latency_ms: float  # from arrival to the finished answer
    estimate_ms: float | None  # the cost model's estimate at dispatch (None without a cost profile)
    output_tokens: int
    finish_reason: str  # stop, length, tool_calls
    tokens_per_forward: float  # output tokens / model calls
    drafted: int  # verified: draft tokens put to the AR check
    accepted: int  # verified: draft tokens it kept
    acceptance: float | None  # accepted / drafted; verified only (0 when every draft was dropped unverified)
    ar_tokens: int  # tokens AR steps wrote (verified falls back to them)
    looked_up: int  # tokens drafted by prompt lookup
    shadow_agreement: float | None = None  # a shadow-verified block answer: the share of it AR accepts (known off the request path)

    @classmethod
    def of(cls, attempt: Attempt, result: GenerationResult, stream: bool) -> Outcome:
        s = result.stats
        estimate = attempt.ticket.estimate_ms
        return cls(mode=attempt.mode, degraded=attempt.degraded, stream=stream,
                   latency_ms=round((time.perf_counter() - attempt.started) * 1000, 2),
                   estimate_ms=None if estimate is None else round(estimate, 1), output_tokens=s.output_tokens,
                   finish_reason=result.finish_reason, tokens_per_forward=round(s.tokens_per_forward, 3), drafted=s.drafted,
                   accepted=s.accepted, acceptance=round(s.acceptance_rate, 3) if attempt.mode == "verified" else None,
                   ar_tokens=s.ar_tokens, looked_up=s.looked_up)

    def record(self) -> dict:
        """The outcome as JSON-able fields: the feed entry's and the decisions log's."""
        return dataclasses.asdict(self)
