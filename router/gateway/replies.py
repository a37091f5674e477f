"""The reply to one routed request, from what failover hands back (`Attempt`): a whole `Answer`, or
the typed parts of a stream (router.gateway.answer_parts), read by `router.gateway.tool_calls` (tool
calls become `ToolCall`s). Each ends by returning the dispatch's ticket to the routing view and
handing the answer to the records (`router.gateway.records`). The wire formats render what these
return: OpenAI's (`router.gateway.answers`) and the Responses API's.

A whole answer under a grammar is checked against its response_format before it is sent (a 422,
never a silent 200). A stream's failure after its first byte is its last part (`Failed`), which each
wire format tells in-band; a client that goes away frees its scheduler slot at the engine's next step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from engines.errors import EngineUnavailableError, TandemError
from engines.types import GenerationResult
from router.decision.engine_health import replica_died
from router.decision.routing_view import RoutingView
from router.gateway.answer_parts import Answer, Failed, Finished, Part, TextDelta
from router.gateway.calls import Call
from router.gateway.errors import UnprocessableError
from router.gateway.outcome import Attempt
from router.gateway.records import Records
from router.gateway.schemas import check_off_loop
from router.gateway.tool_calls import CallReader, read_answer

log = logging.getLogger("tandem.gateway")


class Replies:
    """Replies of one Gateway: its routing `view` (tickets, engine health), `telemetry` (time to
    first token) and `records` (outcomes and errors)."""

    def __init__(self, view: RoutingView, telemetry, records: Records):
        self.view, self.telemetry, self.records = view, telemetry, records

    async def whole(self, call: Call, attempt: Attempt) -> Answer:
        """The answer of a non-streamed request. Raises UnprocessableError (422) for an answer that
        does not match the response_format it was decoded under."""
        result = attempt.result
        self.view.returned(attempt.ticket, ok=True, stats=result.stats)
        # the grammar makes a finished JSON answer parse and validate; this guard says so loudly
        # (a 422, never a silent 200) if a grammar and its schema ever disagree
        check = call.output.content_check_for(result.text, result.finish_reason)
        if check is not None and not await check_off_loop(check.matches, result.text):
            log.error("answer under a grammar does not match its response_format (request %s)", call.request_id)
            self.records.error(422, code="response_format_unsatisfied", decision=attempt.decision, mode=attempt.mode, started=attempt.started)
            raise UnprocessableError("the answer does not match response_format although it was decoded under its grammar",
                                     code="response_format_unsatisfied", param="response_format")
        self.records.answered(call, attempt, result)
        content, calls = read_answer(result.text, bool(call.output.callable)) if call.chat else (result.text, [])
        return Answer.of(attempt, result, content, calls)

    async def parts(self, call: Call, attempt: Attempt) -> AsyncIterator[Part]:
        """The parts of a streamed request, from the stream failover opened: text and tool calls as
        they arrive, then `Finished` or `Failed` (nothing more when the engine's stream just ended)."""
        stream, decision, mode = attempt.stream, attempt.decision, attempt.mode
        finished, ended, stats = False, False, None
        reader = CallReader(bool(call.output.callable))
        try:
            item, first_token = attempt.first, True
            while item is not None:
                if isinstance(item, str):
                    if first_token and item:
                        attempt.first_token_at = time.perf_counter()
                        self.telemetry.ttft.record(attempt.first_token_at - attempt.started, {"mode": mode})
                        first_token = False
                    for part in reader.feed(item) if call.chat else [TextDelta(item)]:
                        yield part
                elif isinstance(item, GenerationResult):
                    finished, stats = True, item.stats
                    self.records.answered(call, attempt, item)
                    for part in reader.finish():
                        yield part
                    content = None if reader.calling else (reader.content if call.chat else item.text)
                    yield Finished(Answer.of(attempt, item, content, reader.calls))
                    break
                elif isinstance(item, TandemError):
                    self.records.error(item.status, code=item.code, decision=decision, mode=mode, started=attempt.started)
                    yield Failed(item)
                    break
                try:
                    item = await asyncio.wait_for(stream.__anext__(), timeout=attempt.timeout_s)
                except StopAsyncIteration:
                    item = None
            ended = True
        except Exception as exc:  # engine died mid-stream: the last part says so
            ended = True
            if replica_died(exc):
                self.view.health.died(self.view.layout.engine(mode))
            self.records.error(503, code="engine_unavailable", decision=decision, mode=mode, started=attempt.started)
            yield Failed(EngineUnavailableError(f"the {mode} engine failed mid-stream: {type(exc).__name__}"))
        finally:
            if not ended:  # closed from outside: the client went away (an ordinary disconnect, not an error)
                log.info("request %s: the client went away mid-stream (%s); its engine row is cancelled", call.request_id, mode)
            self.view.returned(attempt.ticket, ok=finished, stats=stats)
            stream.cancel()  # a client that went away frees its scheduler slot at the engine's next step
