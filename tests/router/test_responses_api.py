"""The Responses API over chat completions: request translation, response objects and streamed
events (each checked against the `openai` package's own types), the previous_response_id store on
a real Redis, and the OpenAI Agents SDK running an agent with a function tool against it.

The gateway's side is what its replies hand the route: typed answers and stream parts
(router.gateway.answer_parts) read by `router.gateway.tool_calls`, so only the model is scripted. The Agents SDK and the
store-or-not of a streamed response go through the real /v1/responses route (router.gateway.ingress, in
process, its Gateway scripted): a copy of the route here once drifted from it. An engine failing
mid-stream cannot be provoked in the shared Ray app (tests/app) without killing a replica, hence here."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter, ValidationError

from engines.errors import InvalidRequestError, ServiceUnavailableError
from router.gateway.answer_parts import Answer, Failed, Finished, Reply
from router.gateway.openai_api import ChatCompletionRequest, validation_error
from router.gateway.responses_answers import new_response_id, to_response
from router.gateway.responses_api import ResponsesRequest, chat_request, to_chat_body
from router.gateway.responses_events import ResponseEvents, encode, translate_stream
from router.gateway.responses_store import DEFAULT_TTL_S, NO_STORE, ResponseStore, conversation_items, history_for, stores
from router.gateway.structured import output_spec
from router.gateway.tool_calls import CallReader, read_answer
from tests.policies.helpers import free_port, redis_client

EVENT = TypeAdapter(ResponseStreamEvent)
TANDEM = {"mode": "block", "routed_mode": "block", "policy_version": 3}
WEATHER_PARAMS = {  # as the Agents SDK writes a strict function schema
    "type": "object", "properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
    "title": "get_weather_args", "additionalProperties": False,
}
WEATHER_TOOL = {"name": "get_weather", "parameters": WEATHER_PARAMS, "strict": True, "type": "function",
                "description": "The weather in a city."}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


# ---- factories: what the SDK sends, what the gateway answers ---------------------------------------------


def sdk_body(**overrides) -> dict:
    """A body as agents.models.openai_responses builds it (input from ItemHelpers, tools from Converter)."""
    body = {"model": "tandem", "input": [{"content": "Weather in Paris?", "role": "user"}], "include": [],
            "instructions": "You answer weather questions.", "tools": [WEATHER_TOOL]}
    return body | overrides


def req_of(**overrides) -> ResponsesRequest:
    return ResponsesRequest.model_validate(sdk_body(**overrides))


def answer_of(text: str, tools: bool, finish: str = "stop", calls=None) -> Answer:
    """The whole answer Replies.whole (router.gateway.replies) makes of the model's answer text
    (`calls`: the calls a stream read, instead of reading `text` whole)."""
    content, read = read_answer(text, tools)
    if calls is not None:
        content, read = (None, calls) if calls else (text, [])
    finish = "tool_calls" if read and finish == "stop" else finish
    return Answer(content=content, calls=read, finish_reason=finish, prompt_tokens=12, output_tokens=7, logprobs=None, tandem=TANDEM)


def stream_parts(text: str, tools: bool, finish: str = "stop", piece: int = 5) -> list:
    """The parts Replies.parts (router.gateway.replies) yields for `text`, fed `piece` characters at a time."""
    reader = CallReader(tools)
    parts = [p for i in range(0, len(text), piece) for p in reader.feed(text[i : i + piece])] + reader.finish()
    return parts + [Finished(answer_of(text, tools, finish, calls=reader.calls if reader.calling else []))]


async def aiter_of(parts: list):
    for part in parts:
        yield part


def streamed(req: ResponsesRequest, parts: list) -> list[dict]:
    """Every event for a stream's parts, each validated as one of OpenAI's stream events."""
    translator = ResponseEvents(req, new_response_id())
    events = translator.start()
    for part in parts:
        events += translator.feed(part)
    events += translator.finish()
    for e in events:
        EVENT.validate_python(e)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


# ---- request -> chat ---------------------------------------------------------------------------------


def test_sdk_body_becomes_a_valid_chat_request_whose_tools_compile():
    chat = chat_request(req_of())
    assert [(m.role, m.content) for m in chat.messages] == [("system", "You answer weather questions."), ("user", "Weather in Paris?")]
    assert chat.tools == [{"type": "function", "function": {k: v for k, v in WEATHER_TOOL.items() if k != "type"}}]
    spec = output_spec(chat)  # the strict schema the SDK writes can be decoded under
    assert spec.callable == ["get_weather"] and spec.grammar


def test_string_input_is_one_user_message_and_sampling_maps():
    body = to_chat_body(ResponsesRequest.model_validate({"input": "hi", "max_output_tokens": 64, "temperature": 0.5, "top_p": 0.9}))
    assert body == {"model": "tandem", "messages": [{"role": "user", "content": "hi"}], "stream": False, "max_tokens": 64,
                    "temperature": 0.5, "top_p": 0.9}
    assert ChatCompletionRequest.model_validate(body).token_budget() == 64


def test_function_call_round_trip_becomes_assistant_and_tool_turns():
    """The SDK's second request: the input, our output items as it echoes them, the tool's result."""
    items = [
        {"content": "Weather in Paris and Rome?", "role": "user"},
        {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}',
         "status": "completed"},
        {"id": "fc_2", "type": "function_call", "call_id": "call_b", "name": "get_weather", "arguments": '{"city": "Rome"}',
         "status": "completed"},
        {"type": "function_call_output", "call_id": "call_a", "output": "22C"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "18C"}]},
    ]
    chat = chat_request(req_of(input=items))
    roles = [m.role for m in chat.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool"]  # the two calls are one assistant turn
    assert [c.id for c in chat.messages[2].tool_calls] == ["call_a", "call_b"] and chat.messages[2].content is None
    assert [(m.tool_call_id, m.content) for m in chat.messages[3:]] == [("call_a", "22C"), ("call_b", "18C")]
    turns = chat.engine_messages()  # what the chat template gets: tool turns named after their call
    assert turns[2]["tool_calls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                      {"name": "get_weather", "arguments": {"city": "Rome"}}]
    assert [t["name"] for t in turns[3:]] == ["get_weather", "get_weather"]


def test_assistant_text_then_its_call_is_one_turn_and_parts_join():
    items = [{"role": "developer", "content": [{"type": "input_text", "text": "Be "}, {"type": "input_text", "text": "brief."}]},
             {"role": "user", "content": "Paris?"},
             {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
              "content": [{"type": "output_text", "text": "Checking.", "annotations": [], "logprobs": []}]},
             {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": "{}"}]
    chat = chat_request(req_of(input=items, instructions=None))
    assert [(m.role, m.content) for m in chat.messages] == [("developer", "Be brief."), ("user", "Paris?"), ("assistant", "Checking.")]
    assert [c.id for c in chat.messages[2].tool_calls] == ["call_a"]


def test_a_tool_result_for_no_call_is_refused_by_chat():
    chat = chat_request(req_of(input=[{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "nope", "output": "1"}]))
    with pytest.raises(InvalidRequestError, match="answers no tool call"):
        chat.engine_messages()


@pytest.mark.parametrize("choice, chat_choice", [
    ("auto", "auto"), ("none", "none"), ("required", "required"),
    ({"type": "function", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
])
def test_tool_choice_maps(choice, chat_choice):
    chat = chat_request(req_of(tool_choice=choice, parallel_tool_calls=False))
    assert chat.tool_choice == chat_choice and chat.parallel_tool_calls is False
    output_spec(chat)


def test_json_schema_text_format_is_a_chat_response_format():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": False}
    text = {"format": {"type": "json_schema", "name": "final_output", "schema": schema, "strict": True}}
    chat = chat_request(req_of(text=text, tools=None))
    assert chat.response_format.type == "json_schema" and chat.response_format.schema_() == schema
    assert chat.response_format.json_schema == {"name": "final_output", "schema": schema, "strict": True}
    assert output_spec(chat).structured == "json_schema"
    assert chat_request(req_of(text={"format": {"type": "json_object"}})).response_format.type == "json_object"
    assert chat_request(req_of(text={"format": {"type": "text"}, "verbosity": "low"})).response_format is None


@pytest.mark.parametrize("overrides, named", [
    ({"tools": [WEATHER_TOOL, {"type": "web_search_preview"}, {"type": "file_search", "vector_store_ids": []}]},
     "file_search, web_search_preview"),
    ({"input": [{"type": "item_reference", "id": "x"}, {"role": "user", "content": "hi"}]}, "item_reference"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]}, "input_image"),
    ({"tool_choice": {"type": "file_search"}}, "file_search"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "needs schema"),
])
def test_what_chat_cannot_serve_is_a_400_naming_it(overrides, named):
    with pytest.raises(ValidationError) as exc:
        req_of(**overrides)
    err = validation_error(list(exc.value.errors()))
    assert err.status == 400 and named in err.message


@pytest.mark.parametrize("overrides", [
    {"input": "bad \ud800"},
    {"instructions": "bad \udfff"},
    {"input": [{"role": "user", "content": "bad \ud800"}]},
    {"input": [{"role": "user", "content": [{"type": "input_text", "text": "bad \ud800"}]}]},
    {"input": [{"role": "user", "content": "x"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "\ud800"}]},
    {"input": [{"role": "user", "content": "x"}, {"type": "function_call_output", "call_id": "c", "output": "\ud800"}]},
])
def test_lone_surrogates_are_refused(overrides):
    with pytest.raises(ValidationError, match="surrogate"):
        req_of(**overrides)


def test_an_input_with_no_message_is_a_400():
    with pytest.raises(InvalidRequestError, match="no message") as exc:
        to_chat_body(req_of(input=[], instructions=None))
    assert exc.value.param == "input"


def test_reasoning_items_are_dropped():
    chat = chat_request(req_of(input=[{"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "hi"}]))
    assert [m.role for m in chat.messages] == ["system", "user"]


# ---- chat -> response ----------------------------------------------------------------------------------


def test_text_answer_is_a_completed_response_openai_accepts():
    req = req_of(metadata={"team": "a"}, max_output_tokens=100, temperature=0.2)
    rid = new_response_id()
    resp = to_response(answer_of("It is sunny.", tools=True), req, rid)
    parsed = Response.model_validate(resp)
    assert parsed.id == rid and rid.startswith("resp_") and parsed.status == "completed" and parsed.output_text == "It is sunny."
    assert resp["output"][0]["id"].startswith("msg_") and parsed.incomplete_details is None
    assert parsed.usage.input_tokens == 12 and parsed.usage.output_tokens == 7 and parsed.usage.total_tokens == 19
    assert (parsed.metadata, parsed.max_output_tokens, parsed.temperature, parsed.instructions) == ({"team": "a"}, 100, 0.2,
                                                                                                    "You answer weather questions.")
    assert parsed.tools[0].name == "get_weather" and parsed.tool_choice == "auto" and parsed.parallel_tool_calls is True
    assert resp["tandem"] == TANDEM


def test_tool_calls_are_function_call_items_keeping_the_call_id():
    answer = answer_of(CALL + CALL.replace("Paris", "Rome"), tools=True)
    resp = to_response(answer, req_of(), new_response_id())
    parsed = Response.model_validate(resp)
    chat_ids = [c.id for c in answer.calls]
    assert [(o.type, o.call_id, o.name, json.loads(o.arguments)) for o in parsed.output] == [
        ("function_call", chat_ids[0], "get_weather", {"city": "Paris"}), ("function_call", chat_ids[1], "get_weather", {"city": "Rome"})]
    assert all(o["id"].startswith("fc_") and o["status"] == "completed" for o in resp["output"])


def test_length_is_incomplete_for_max_output_tokens():
    resp = to_response(answer_of("It is sun", tools=False, finish="length"), req_of(max_output_tokens=3), new_response_id())
    parsed = Response.model_validate(resp)
    assert parsed.status == "incomplete" and parsed.incomplete_details.reason == "max_output_tokens"
    assert parsed.output[0].status == "incomplete" and parsed.output_text == "It is sun"


def test_named_tool_choice_and_json_format_are_echoed_as_openai_writes_them():
    text = {"format": {"type": "json_schema", "name": "final_output", "schema": {"type": "object"}, "strict": True}}
    req = req_of(tool_choice={"type": "function", "name": "get_weather"}, text=text)
    parsed = Response.model_validate(to_response(answer_of(CALL, tools=True), req, new_response_id()))
    assert parsed.tool_choice.name == "get_weather" and parsed.text.format.type == "json_schema"
    assert parsed.text.format.schema_ == {"type": "object"}


# ---- streaming -----------------------------------------------------------------------------------------


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


# ---- the real gateway: one answer, two wire formats -----------------------------------------------------


def test_the_route_answers_what_chat_answers_from_the_gateways_typed_reply(tmp_path):
    """A real Gateway over the shipped tiny engine (in process, no Ray): under greedy decoding the
    Responses route, whole and streamed, carries the chat route's answer, usage, route and headers."""
    from engines.deployment import EngineDeployment
    from engines.types import MODES
    from router.gateway.orchestration import Gateway
    from tests.router.local_engines import LocalEngine, answers_from

    engine = LocalEngine(EngineDeployment(modes=MODES, max_wait_s=0.001))
    gw = Gateway(engine, engine, policy_source=None, request_timeout_s=60.0, probe_interval_s=0.05)
    ask = {"model": "tandem-ar", "max_tokens": 8}
    requests = [("/v1/chat/completions", ask | {"messages": [{"role": "user", "content": "Say hi."}]}),
                ("/v1/responses", {"model": "tandem-ar", "input": "Say hi.", "max_output_tokens": 8}),
                ("/v1/responses", {"model": "tandem-ar", "input": "Say hi.", "max_output_tokens": 8, "stream": True})]

    chat, whole, stream = asyncio.run(answers_from(gw, requests))
    assert [r.status_code for r in (chat, whole, stream)] == [200, 200, 200], whole.text + stream.text
    text, usage = chat.json()["choices"][0]["message"]["content"], chat.json()["usage"]
    parsed = Response.model_validate(whole.json())
    assert text and parsed.output_text == text
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert whole.json()["tandem"]["mode"] == chat.json()["tandem"]["mode"] == "ar"
    events = sse_events(stream.text)
    for e in events:
        EVENT.validate_python(e)
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == text
    final = Response.model_validate(events[-1]["response"])
    assert final.output_text == text and final.usage == parsed.usage and final.status == parsed.status
    assert {h: stream.headers[h] for h in ("x-tandem-mode", "x-tandem-route-reason")} == {
        h: whole.headers[h] for h in ("x-tandem-mode", "x-tandem-route-reason")} == {"x-tandem-mode": "ar", "x-tandem-route-reason": "forced_model"}
    assert [(e["status"], e["stream"]) for e in gw.feed.after(0)] == [(200, False), (200, False), (200, True)]  # recorded once each


# ---- previous_response_id ------------------------------------------------------------------------------


@pytest.fixture
def store(prefix):
    client = redis_client()
    yield ResponseStore(client, prefix=prefix + "response:")
    client.close()


def test_store_round_trip_with_ttl_and_the_chain_replays(store, prefix):
    first = req_of()
    resp = to_response(answer_of(CALL, tools=True), first, new_response_id())
    assert stores(first, store) and store.save(resp["id"], conversation_items(first, None, resp), ttl_s=600)
    assert 0 < redis_client().ttl(f"{prefix}response:{resp['id']}") <= 600
    call_id = resp["output"][0]["call_id"]
    second = req_of(previous_response_id=resp["id"], instructions="Use Celsius.",
                    input=[{"type": "function_call_output", "call_id": call_id, "output": "22C"}])
    chat = chat_request(second, history_for(second, store))
    assert [(m.role, m.content) for m in chat.messages] == [("system", "Use Celsius."), ("user", "Weather in Paris?"),
                                                            ("assistant", None), ("tool", "22C")]
    assert chat.messages[2].tool_calls[0].id == call_id
    chat.engine_messages()  # the tool result answers the replayed call


def test_store_refuses_oversized_entries_and_misses_are_none(prefix):
    client = redis_client()
    small = ResponseStore(client, prefix=prefix, max_bytes=1024)
    assert small.save("resp_big", [{"role": "user", "content": "x" * 2000}]) is False
    assert small.load("resp_big") is None and small.load("resp_never") is None
    assert small.save("resp_ok", [{"role": "user", "content": "é"}]) and small.load("resp_ok") == [{"role": "user", "content": "é"}]
    assert client.ttl(f"{prefix}resp_ok") > 23 * 3600  # the default TTL: a day
    client.close()


def test_previous_response_id_without_a_store_or_a_stored_response_is_a_400(store):
    req = req_of(previous_response_id="resp_missing")
    with pytest.raises(InvalidRequestError) as exc:
        history_for(req, None)
    assert exc.value.status == 400 and exc.value.message == NO_STORE and exc.value.param == "previous_response_id"
    with pytest.raises(InvalidRequestError, match="not found") as exc:
        history_for(req, store)
    assert exc.value.code == "previous_response_not_found"
    assert history_for(req_of(), None) is None and not stores(req_of(store=False), store) and not stores(req_of(), None)


def test_redis_down_fails_loads_loudly_and_saves_quietly():
    down = ResponseStore(redis.Redis(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2, retry=Retry(NoBackoff(), 0)))
    assert down.save("resp_1", []) is False
    with pytest.raises(ServiceUnavailableError):
        down.load("resp_1")


# ---- the OpenAI Agents SDK, end to end -----------------------------------------------------------------


def scripted_answer(messages: list[dict]) -> str:
    """The model: call get_weather for the question, then answer with the tool's result."""
    last = messages[-1]
    return f"It is {last['content']} in Paris." if last["role"] == "tool" else CALL


class ScriptedGateway:
    """The Gateway as the real /v1/responses route (router.gateway.ingress) uses it - `answer`, `redis`,
    `key_prefix`, `responses_ttl_s` (an attribute the route gains and this lacks fails loudly) - over
    the scripted model: the typed reply Gateway.answer makes (a whole answer, or a stream's parts).
    `fail_after` cuts a stream after that many parts with the `Failed` part Replies.parts
    (router.gateway.replies) ends with when an engine fails mid-stream."""

    def __init__(self, redis_client=None, key_prefix: str = "", fail_after: int | None = None):
        self.redis, self.key_prefix, self.fail_after = redis_client, key_prefix, fail_after
        self.responses_ttl_s = DEFAULT_TTL_S

    async def answer(self, call, headers: dict[str, str]) -> Reply:
        text, tools = scripted_answer(call.gen.messages), bool(call.output.callable)
        decision = {"x-tandem-mode": "block"}
        if not call.stream:
            return Reply(decision, answer=answer_of(text, tools))
        parts = stream_parts(text, tools)
        if self.fail_after is not None:
            parts = parts[: self.fail_after] + [Failed(ServiceUnavailableError("the block engine failed mid-stream: RuntimeError"))]
        return Reply(decision, parts=aiter_of(parts))


@pytest.fixture
def served():
    """The real FastAPI app's routes in process (no Ray), its Gateway replaced by `ScriptedGateway`s:
    call `served(gw)` for an httpx transport whose requests reach the real /v1/responses route."""
    from router.gateway.ingress import api, gateway

    def transport(gw: ScriptedGateway) -> httpx.ASGITransport:
        api.dependency_overrides[gateway] = lambda: gw
        return httpx.ASGITransport(app=api)

    yield transport
    api.dependency_overrides.pop(gateway, None)


def recording(seen: list[dict]) -> dict:
    """httpx event hooks that keep each request's JSON body in `seen`."""
    async def keep(request: httpx.Request) -> None:
        seen.append(json.loads(request.content))

    return {"request": [keep]}


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("fails", [True, False], ids=["failed", "completed"])
def test_the_route_stores_a_streamed_response_unless_it_failed(served, store, prefix, fails):
    """The real route's streaming branch: a stream cut by an engine failure ends in response.failed and
    is not kept for previous_response_id; a finished one is."""
    client = redis_client()
    transport = served(ScriptedGateway(client, prefix, fail_after=3 if fails else None))

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://tandem.test") as http:
            return await http.post("/v1/responses", json=sdk_body(stream=True, tools=[], input="Weather in Paris?"))

    r = asyncio.run(run())
    client.close()
    assert r.status_code == 200, r.text
    events = sse_events(r.text)
    rid = events[0]["response"]["id"]
    assert events[-1]["type"] == ("response.failed" if fails else "response.completed")
    kept = store.load(rid)
    if fails:
        assert kept is None, "a failed stream was stored"
    else:
        assert [(i["role"], i["type"]) for i in kept] == [("user", "message"), ("assistant", "message")], kept  # the turn, kept whole


def agent_with(transport: httpx.AsyncBaseTransport, seen: list[dict]):
    from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    calls = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "22C"

    client = AsyncOpenAI(base_url="http://tandem.test/v1", api_key="unused",
                         http_client=httpx.AsyncClient(transport=transport, event_hooks=recording(seen)))
    agent = Agent(name="weather", instructions="You answer weather questions.", tools=[get_weather],
                  model=OpenAIResponsesModel(model="tandem", openai_client=client))
    return agent, calls


def test_agents_sdk_runs_a_function_tool_agent(served):
    from agents import Runner

    seen: list[dict] = []
    agent, calls = agent_with(served(ScriptedGateway()), seen)
    result = asyncio.run(Runner.run(agent, "Weather in Paris?"))
    assert calls == ["Paris"] and result.final_output == "It is 22C in Paris."
    assert len(seen) == 2 and seen[1]["input"][-1]["type"] == "function_call_output"
    assert seen[1]["input"][-1]["call_id"] == seen[1]["input"][-2]["call_id"]  # the SDK echoed our call back


def test_agents_sdk_streams_a_function_tool_agent(served):
    from agents import Runner

    seen: list[dict] = []
    agent, calls = agent_with(served(ScriptedGateway()), seen)

    async def run():
        result = Runner.run_streamed(agent, "Weather in Paris?")
        kinds = [e.type async for e in result.stream_events()]
        return result, kinds

    result, kinds = asyncio.run(run())
    assert calls == ["Paris"] and result.final_output == "It is 22C in Paris."
    assert all(body["stream"] for body in seen) and "raw_response_event" in kinds
    assert result.context_wrapper.usage.input_tokens == 24  # usage from each response.completed


def test_agents_sdk_chains_with_previous_response_id(served, store, prefix):
    from agents import Runner

    seen: list[dict] = []
    client = redis_client()
    agent, calls = agent_with(served(ScriptedGateway(client, prefix)), seen)
    result = asyncio.run(Runner.run(agent, "Weather in Paris?", auto_previous_response_id=True))
    assert calls == ["Paris"] and result.final_output == "It is 22C in Paris."
    assert seen[1]["previous_response_id"] and [i["type"] for i in seen[1]["input"]] == ["function_call_output"]
    client.close()
