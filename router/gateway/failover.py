"""One request at the engines: a bounded call, and once more in the policy's failure mode.

`Failover.attempt(gen, decision, stream=..., started=...)` asks the engine for the decided mode (an
`EngineClient`, `router.decision.engine_client`) for a whole answer, or opens a stream and waits for
its first item, and hands back an `Attempt`: where it was answered, and the answer or stream. Every wait is bounded: by the request's deadline
(`request_timeout_s`, failover included, so a failover gets what is left, never a fresh
timeout) and by the engine's health (`router.decision.engine_health`): nothing is sent to an engine that
is down, and an engine that goes down fails over at once the requests still waiting on it. On a
503 (failure, timeout, down) it tries once more in the policy's `on_engine_failure` mode when that
engine is up and the cost profile expects it to finish in the time left; otherwise the client
gets the 503, with Retry-After. Abandoned work is cancelled at the engine (an EngineClient's contract).

Everything routing-made that a retry follows comes with the `Decision` (`Router.decide` puts it
there): the policy that routed the request (`decision.policy`: its on_engine_failure), the prices
it was routed by (`decision.prices`) and its draft key. The routing view prices the dispatch and
picks the mode that takes over (`RoutingView.dispatch`, `RoutingView.takeover_mode`) by them, so a
request fails over under the policy and prices that routed it, even when a newer policy landed in
between, and nothing here calls back into the router.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from engines.errors import EngineUnavailableError, TandemError
from engines.types import GenerationRequest, GenerationResult
from router.decision.engine_client import EngineClient
from router.decision.engine_health import RETRY_AFTER_S, replica_died
from router.decision.routing_view import RoutingView
from router.decision.types import Decision
from router.gateway.outcome import Attempt
from router.gateway.telemetry import engine_span

log = logging.getLogger("tandem.gateway")


class Failover:
    """The engine calls of one Gateway: `engines` (EngineClients) by name, its routing `view`,
    `telemetry`, the request deadline `timeout_s`, and `on_error(status, code, decision, mode, started)`
    for the error a client gets."""

    def __init__(self, engines: dict[str, EngineClient], view: RoutingView, telemetry, timeout_s: float, on_error: Callable):
        self.engines, self.view, self.telemetry = engines, view, telemetry
        self.timeout_s, self.on_error = timeout_s, on_error

    async def attempt(self, gen: GenerationRequest, decision: Decision, *, stream: bool = False, started: float | None = None,
                      timeout_s: float | None = None) -> Attempt:
        """A whole answer (or, `stream`, an open stream and its first item) from the engine for
        `gen.mode`, bounded by the request's deadline (`timeout_s`, default request_timeout_s;
        failover included) and by
        the engine's health: nothing is sent to an engine that is down, and an engine that goes down
        fails over the requests waiting on it at once. On a 503 (failure, timeout, down) once more
        in the policy's on_engine_failure mode (the policy that routed it: `decision.policy`), if
        that engine is up and can finish in the time left. The caller returns the Attempt's ticket
        to the view. Raises the last TandemError (a 503 with Retry-After)."""
        assert decision.prices is not None, "failover needs a decision made by Router.decide (it carries its policy and prices)"
        started = time.perf_counter() if started is None else started
        call: Callable[[GenerationRequest], Awaitable] = self.open_stream if stream else self.call_generate
        timeout_s = timeout_s or self.timeout_s
        deadline = time.monotonic() + timeout_s
        mode, error = gen.mode, None
        for attempt in range(2):
            request = gen if attempt == 0 else dataclasses.replace(gen, mode=mode)
            engine = self.view.layout.engine(mode)
            with self.telemetry.tracer.start_as_current_span("tandem.engine", attributes={"mode": mode, "attempt": attempt}) as span:
                if self.view.health.is_down(engine):
                    out = EngineUnavailableError(f"the {mode} engine is down (its replica is restarting)")
                else:
                    ticket = self.view.dispatch(request, decision)  # priced as the decision was
                    out = await self._bounded(call(request), engine, mode, deadline, timeout_s)
                    if not isinstance(out, TandemError):
                        answered = Attempt(decision, request, mode, attempt > 0, ticket, started, timeout_s)
                        if stream:
                            answered.stream, answered.first = out
                        else:
                            engine_span(self.telemetry.tracer, span, out)
                            answered.result = out
                        return answered
                    self.view.returned(ticket, ok=False)
                span.set_attribute("error.code", out.code)
            error = out
            if out.status != 503 or (mode := self.view.takeover_mode(mode, gen, decision, (deadline - time.monotonic()) * 1000.0)) is None:
                break
        if error.status == 503:
            error.headers.setdefault("Retry-After", str(round(RETRY_AFTER_S)))
        self.on_error(error.status, code=error.code, decision=decision, mode=mode, started=started)
        raise error

    async def _bounded(self, work: Awaitable, engine: str, mode: str, deadline: float, timeout_s: float):
        """`work`'s result, or the TandemError that ends the wait: the deadline passed, the engine
        went down, the engine failed. The abandoned work is cancelled (the EngineClient cancels it: the engine
        drops its row at the next step)."""
        task = asyncio.ensure_future(work)
        went_down = self.view.health.went_down(engine)
        try:
            await asyncio.wait((task, went_down), timeout=max(0.0, deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the client went away
            task.cancel()
            raise
        if not task.done():
            task.cancel()
            if went_down.done():
                return EngineUnavailableError(f"the {mode} engine went down")
            return EngineUnavailableError(f"the {mode} engine did not answer in {timeout_s:g} s", code="engine_timeout")
        exc = task.exception()
        if exc is None:
            return task.result()
        if isinstance(exc, TandemError):
            return exc
        if replica_died(exc):  # the replica is gone: probe the engine now, so the requests queued behind it fail over too
            self.view.health.died(engine)
        return EngineUnavailableError(f"the {mode} engine failed: {type(exc).__name__}")

    async def call_generate(self, request: GenerationRequest) -> GenerationResult | TandemError:
        return await self.engines[self.view.layout.engine(request.mode)].generate(request)

    async def open_stream(self, request: GenerationRequest):
        """Start streaming and wait for the first item, so that a full queue is a real 429 and a
        failed engine degrades before any byte is sent. Returns (stream, first item or None)."""
        stream = self.engines[self.view.layout.engine(request.mode)].stream(request)
        try:
            first = await stream.__anext__()
        except StopAsyncIteration:
            return stream, None
        except BaseException:
            stream.cancel()
            raise
        if isinstance(first, TandemError):
            stream.cancel()
            return first
        return stream, first
