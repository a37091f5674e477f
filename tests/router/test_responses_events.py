"""The Responses API's streamed events (router/gateway/responses_events.py): a stream's typed parts
as OpenAI's events in OpenAI's order, each checked against the `openai` package's own event types,
ending as the whole answer's response would; closing the event stream closes the parts."""

from __future__ import annotations

import asyncio
import json

from openai.types.responses import Response

from engines.errors import ServiceUnavailableError
from router.gateway.answer_parts import Failed
from router.gateway.responses_answers import new_response_id, to_response
from router.gateway.responses_events import ResponseEvents, encode, translate_stream
from tests.router.responses_factories import CALL, EVENT, TANDEM, aiter_of, answer_of, req_of, stream_parts, streamed, types


def test_streamed_text_follows_openai_order_and_matches_the_whole_response():
    req = req_of()
    events = streamed(req, stream_parts("It is sunny in Paris.", tools=True))
    assert types(events)[:5] == ["response.created", "response.in_progress", "response.output_item.added",
                                 "response.content_part.added", "response.output_text.delta"]
    assert types(events)[-5:] == ["response.output_text.delta", "response.output_text.done", "response.content_part.done",
                                  "response.output_item.done", "response.completed"]
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(e["delta"] for e in deltas) == "It is sunny in Paris."
    item_id = events[2]["item"]["id"]
    assert {e["item_id"] for e in deltas} == {item_id} and events[2]["item"]["status"] == "in_progress"
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["text"] == "It is sunny in Paris."
    final = Response.model_validate(events[-1]["response"])
    whole = Response.model_validate(to_response(answer_of("It is sunny in Paris.", tools=True), req, "resp_x"))
    assert final.output_text == whole.output_text and final.output[0].id == item_id
    assert final.usage == whole.usage and events[-1]["response"]["tandem"] == TANDEM
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []


def test_streamed_tool_calls_are_function_call_items_whose_fragments_join():
    events = streamed(req_of(), stream_parts(CALL + CALL.replace("Paris", "Rome"), tools=True, piece=7))
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [a["item"]["type"] for a in added] == ["function_call", "function_call"] and [a["output_index"] for a in added] == [0, 1]
    for a in added:
        fid = a["item"]["id"]
        fragments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta" and e["item_id"] == fid)
        done = next(e for e in events if e["type"] == "response.function_call_arguments.done" and e["item_id"] == fid)
        assert fragments == done["arguments"] and json.loads(fragments)["city"] in ("Paris", "Rome")
    first_done = types(events).index("response.output_item.done")
    assert first_done < types(events).index("response.output_item.added", first_done)  # one item after another
    final = Response.model_validate(events[-1]["response"])
    assert events[-1]["type"] == "response.completed" and [o.name for o in final.output] == ["get_weather", "get_weather"]
    assert [json.loads(o.arguments) for o in final.output] == [{"city": "Paris"}, {"city": "Rome"}]
    assert final.output[0].call_id == added[0]["item"]["call_id"] and final.output[0].call_id.startswith("call_")


def test_streamed_length_ends_with_response_incomplete():
    events = streamed(req_of(max_output_tokens=3), stream_parts("It is sun", tools=False, finish="length"))
    assert events[-1]["type"] == "response.incomplete"
    final = Response.model_validate(events[-1]["response"])
    assert final.incomplete_details.reason == "max_output_tokens" and final.output[0].status == "incomplete"


def test_an_empty_answer_streams_an_empty_message_as_unstreamed():
    events = streamed(req_of(), stream_parts("", tools=False))
    assert types(events) == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                             "response.output_text.done", "response.content_part.done", "response.output_item.done",
                             "response.completed"]
    whole = to_response(answer_of("", tools=False), req_of(), "resp_x")
    assert events[-1]["response"]["output"][0]["content"] == whole["output"][0]["content"]


def test_a_failed_part_fails_the_response_and_ends_it():
    parts = stream_parts("It is sunny.", tools=False)[:3]
    parts.append(Failed(ServiceUnavailableError("the block engine failed mid-stream: RuntimeError")))
    events = streamed(req_of(), parts + stream_parts("More.", tools=False))
    assert events[-1]["type"] == "response.failed" and types(events).count("response.failed") == 1
    failed = Response.model_validate(events[-1]["response"])
    assert failed.status == "failed" and failed.error.code == "server_error" and "mid-stream" in failed.error.message


def test_a_stream_that_ends_unfinished_fails():
    events = streamed(req_of(), stream_parts("It is sunny.", tools=False)[:3])
    assert events[-1]["type"] == "response.failed" and "ended before" in events[-1]["response"]["error"]["message"]


def test_translate_stream_writes_each_event_as_sse():
    async def collect():
        parts = aiter_of(stream_parts("Hello there.", tools=False, piece=3))
        return [s async for s in translate_stream(parts, ResponseEvents(req_of(), new_response_id()))]

    out = asyncio.run(collect())
    for s in out:
        head, data = s.removesuffix("\n\n").split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert head == f"event: {event['type']}" and EVENT.validate_python(event)
    assert json.loads(out[-1].split("data: ")[1])["response"]["output"][0]["content"][0]["text"] == "Hello there."
    assert encode({"type": "error", "sequence_number": 0, "message": "x"}).startswith("event: error\ndata: {")


def test_closing_the_responses_stream_closes_the_stream_parts():
    closed = []

    async def parts():
        try:
            for s in stream_parts("Hello there, a long answer.", tools=False, piece=2):
                yield s
        finally:
            closed.append(True)

    async def first_delta():
        out = translate_stream(parts(), ResponseEvents(req_of(), new_response_id()))
        async for s in out:
            if s.startswith("event: response.output_text.delta"):
                break
        await out.aclose()  # what Starlette does when the client goes away
        return closed

    assert asyncio.run(first_delta()) == [True]


def test_a_streamed_response_that_could_not_be_stored_says_store_false_in_its_terminal_event():
    """Issue 54: a response answered while Redis was down came with an id a later previous_response_id
    could not find, and nothing told the client. Stored before its terminal event, it says so."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from router.gateway.responses_store import ResponseStore, conversation_items
    from tests.policies.helpers import REDIS_URL, free_port, unique_prefix

    req, response_id = req_of(), new_response_id()
    down = ResponseStore(redis.Redis(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2, retry=Retry(NoBackoff(), 0)))
    up = ResponseStore(redis.Redis.from_url(REDIS_URL), prefix=unique_prefix())

    async def run(store):
        async def keep(response):
            return await asyncio.to_thread(store.save, response_id, conversation_items(req, None, response))

        events = ResponseEvents(req, response_id)
        return [json.loads(e.removeprefix("event: ").split("data: ", 1)[1])
                async for e in translate_stream(aiter_of(stream_parts("Sunny.", tools=True)), events, keep)]

    for store, stored in ((down, False), (up, True)):
        final = asyncio.run(run(store))[-1]
        assert final["type"] == "response.completed" and final["response"]["store"] is stored
        assert (up.load(response_id) is not None) is stored
