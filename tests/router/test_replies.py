"""Replies (router/gateway/replies.py): what failover hands back (`Attempt`) becomes a typed answer
or the typed parts of a stream, read by the tool-call reader, checked against its response_format,
and in every case the dispatch's ticket goes back to the routing view, the outcome or error to the
records, and a stream's engine work is cancelled. Real parts: the routing view, the records
(stats, feed, metrics), the request path's own Call, answers rendered as OpenAI's; the engine's
stream is scripted (the EngineStream contract: items in order, then `cancel()`), so a tool call and a
mid-stream failure can be told apart from the model's whims."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from engines.errors import EngineUnavailableError
from engines.types import DecodeStats, GenerationRequest, GenerationResult
from router.decision.routing_view import RoutingView
from router.decision.types import Decision
from router.gateway.answer_parts import CallArguments, CallStarted, Failed, Finished, TextDelta
from router.gateway.answers import DONE, stream_chunks, whole_answer
from router.gateway.calls import chat_call
from router.gateway.decision_feed import DecisionFeed
from router.gateway.decisions_log import DecisionsLogSettings
from router.gateway.errors import UnprocessableError
from router.gateway.openai_api import ChatCompletionRequest
from router.gateway.outcome import Attempt
from router.gateway.records import Records
from router.gateway.replies import Replies
from router.gateway.structured import output_spec
from router.gateway.telemetry import GatewayStats, Telemetry
from tests.router.local_engines import GoneEngine

ASK = [{"role": "user", "content": "Weather in Paris?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}


class ScriptedStream:
    """An EngineStream of `items` (text pieces, then a GenerationResult, or an exception to raise)."""

    def __init__(self, items: list):
        self.items, self.cancelled = list(items), False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.items:
            raise StopAsyncIteration
        item = self.items.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def cancel(self) -> None:
        self.cancelled = True


def call_of(stream: bool = False, **body):
    req = ChatCompletionRequest.model_validate({"model": "tandem", "messages": ASK, "max_tokens": 32, "stream": stream} | body)
    call = chat_call(req, {}, output_spec(req))
    call.request_id = "chatcmpl-replies"
    return call


def result_of(text: str, finish: str = "stop") -> GenerationResult:
    stats = DecodeStats(prompt_tokens=15, output_tokens=9, encoder_calls=10, latency_s=0.01)
    return GenerationResult(request_id="chatcmpl-replies", mode="ar", text=text, token_ids=list(range(9)), finish_reason=finish, stats=stats)


@pytest.fixture
def replies() -> Replies:
    view, telemetry = RoutingView({"block": GoneEngine(), "ar": GoneEngine("AREngine")}), Telemetry("none")
    records = Records(GatewayStats(), DecisionFeed(), telemetry, None, DecisionsLogSettings(), "unused", None, timeout_s=5.0)
    return Replies(view, telemetry, records)


def attempt_of(replies: Replies, call, result: GenerationResult | None = None, items: list | None = None) -> Attempt:
    """An attempt failover would hand back for `call` in AR: dispatched now at the real routing view."""
    decision = Decision(mode="ar", canvas=None, steps=None, reason="test", rule="forced_model", task="plan", predicted_tokens=32,
                        confidence=1.0, policy_version=1, request_id=call.request_id)
    gen = GenerationRequest(messages=ASK, mode="ar")
    ticket = replies.view.dispatched(gen, estimate_ms=None, service_ms=None, task="plan")
    attempt = Attempt(decision=decision, request=gen, mode="ar", degraded=False, ticket=ticket, started=time.perf_counter(), timeout_s=5.0,
                      result=result)
    if items is not None:
        attempt.stream = ScriptedStream(items[1:])
        attempt.first = items[0]
    return attempt


def in_flight(replies: Replies) -> int:
    return replies.view.snapshot()["in_flight"]["ar"]


def collect(parts) -> list:
    async def run():
        return [p async for p in parts]
    return asyncio.run(run())


def test_a_whole_tool_answer_is_its_calls_and_renders_as_openai_tool_calls(replies):
    call = call_of(tools=[WEATHER])
    attempt = attempt_of(replies, call, result_of(CALL))
    assert in_flight(replies) == 1
    answer = asyncio.run(replies.whole(call, attempt))
    assert answer.content is None and answer.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in answer.calls] == [("get_weather", {"city": "Paris"})]
    assert (answer.prompt_tokens, answer.output_tokens, answer.tandem["mode"]) == (15, 9, "ar")
    body = whole_answer(call, answer)
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["choices"][0]["message"]["content"] is None
    assert body["choices"][0]["message"]["tool_calls"][0]["id"] == answer.calls[0].id and body["usage"]["total_tokens"] == 24
    assert in_flight(replies) == 0 and replies.records.stats.snapshot()["modes"]["ar"]["requests"] == 1


def test_a_whole_answer_that_breaks_its_schema_is_a_422_and_counted(replies):
    call = call_of(response_format=SCHEMA)
    with pytest.raises(UnprocessableError) as exc:
        asyncio.run(replies.whole(call, attempt_of(replies, call, result_of('{"town": "Paris"}'))))
    assert exc.value.status == 422 and exc.value.param == "response_format"
    assert replies.records.stats.snapshot()["errors"] == {"422": 1} and in_flight(replies) == 0
    answer = asyncio.run(replies.whole(call, attempt_of(replies, call, result_of('{"city": "Paris"}'))))
    assert answer.content == '{"city": "Paris"}' and answer.finish_reason == "stop"


def test_a_streamed_tool_answer_is_its_parts_joining_to_the_whole_answer(replies):
    call = call_of(stream=True, tools=[WEATHER])
    pieces = [CALL[i : i + 7] for i in range(0, len(CALL), 7)]
    attempt = attempt_of(replies, call, items=pieces + [result_of(CALL)])
    parts = collect(replies.parts(call, attempt))
    assert isinstance(parts[0], CallStarted) and parts[0].call.name == "get_weather"
    assert json.loads("".join(p.fragment for p in parts if isinstance(p, CallArguments))) == {"city": "Paris"}
    assert not [p for p in parts if isinstance(p, TextDelta)]
    assert isinstance(parts[-1], Finished) and parts[-1].answer.finish_reason == "tool_calls"
    assert attempt.stream.cancelled and in_flight(replies) == 0
    assert [(e["status"], e["stream"]) for e in replies.records.feed.after(0)] == [(200, True)]


def test_a_stream_renders_as_chat_chunks_ending_in_done(replies):
    call = call_of(stream=True)
    attempt = attempt_of(replies, call, items=["It is ", "sunny.", result_of("It is sunny.")])
    chunks = collect(stream_chunks(call, replies.parts(call, attempt)))
    assert chunks[-1] == DONE
    events = [json.loads(c.removeprefix("data: ")) for c in chunks[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == "It is sunny."
    assert events[-1]["choices"][0]["finish_reason"] == "stop" and events[-1]["tandem"]["mode"] == "ar"


def test_an_engine_failing_mid_stream_ends_in_failed_and_frees_the_slot(replies):
    call = call_of(stream=True)
    attempt = attempt_of(replies, call, items=["It is ", RuntimeError("replica lost")])
    parts = collect(replies.parts(call, attempt))
    assert parts[0] == TextDelta("It is ") and isinstance(parts[-1], Failed) and len(parts) == 2
    assert isinstance(parts[-1].error, EngineUnavailableError) and "mid-stream" in parts[-1].error.message
    assert attempt.stream.cancelled and in_flight(replies) == 0
    assert [(e["status"], e["error"]) for e in replies.records.feed.after(0)] == [(503, "engine_unavailable")]


def test_a_client_gone_mid_stream_cancels_the_engines_work(replies, caplog):
    caplog.set_level("INFO", logger="tandem.gateway")
    call = call_of(stream=True)
    attempt = attempt_of(replies, call, items=["It ", "is ", "sunny.", result_of("It is sunny.")])

    async def first_part_then_gone():
        parts = replies.parts(call, attempt)
        first = await parts.__anext__()
        await parts.aclose()  # what Starlette does when the client goes away
        return first

    assert asyncio.run(first_part_then_gone()) == TextDelta("It ")
    assert attempt.stream.cancelled and in_flight(replies) == 0 and replies.records.feed.after(0) == []
    # an ordinary disconnect: one INFO line naming the request, never an error
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    assert [(r.levelname, call.request_id in r.getMessage()) for r in gone] == [("INFO", True)]


def test_streams_that_end_by_themselves_log_no_disconnect(replies, caplog):
    caplog.set_level("INFO", logger="tandem.gateway")
    for items in (["It is ", "sunny.", result_of("It is sunny.")], ["It is ", RuntimeError("replica lost")], ["It is "]):
        call = call_of(stream=True)
        collect(replies.parts(call, attempt_of(replies, call, items=items)))
    assert not [r for r in caplog.records if "went away" in r.getMessage()]
