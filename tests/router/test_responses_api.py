"""The Responses API over chat completions (router/gateway/responses_api.py): request translation,
the real /v1/responses route over a real Gateway (one answer, two wire formats), and the OpenAI
Agents SDK running an agent with a function tool against it. Response objects, streamed events and
the previous_response_id store have tests of their own (test_responses_answers.py,
test_responses_events.py, test_responses_store.py).

The Agents SDK and the store-or-not of a streamed response go through the real /v1/responses route
(router.gateway.ingress, in process, its Gateway scripted at the typed reply it hands the route:
tests/router/responses_factories.py): a copy of the route here once drifted from it. An engine
failing mid-stream cannot be provoked in the shared Ray app (tests/app) without killing a replica, hence here."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from openai.types.responses import Response
from pydantic import ValidationError

from engines.errors import InvalidRequestError, ServiceUnavailableError
from router.gateway.answer_parts import Failed, Reply
from router.gateway.openai_api import ChatCompletionRequest, validation_error
from router.gateway.responses_api import ResponsesRequest
from router.gateway.responses_chat import chat_request, to_chat_body
from router.gateway.responses_store import DEFAULT_TTL_S
from router.gateway.structured import output_spec
from tests.policies.helpers import redis_client
from tests.router.responses_factories import CALL, EVENT, WEATHER_TOOL, aiter_of, answer_of, req_of, sdk_body, stream_parts


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


# ---- the real gateway: one answer, two wire formats -----------------------------------------------------


def test_the_route_answers_what_chat_answers_from_the_gateways_typed_reply(tmp_path):
    """A real Gateway over the shipped tiny engine (in process, no Ray): under greedy decoding the
    Responses route, whole and streamed, carries the chat route's answer, usage, route and headers."""
    from engines.replica.deployment import EngineDeployment
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
