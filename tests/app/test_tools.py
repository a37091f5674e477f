"""Tool calling and structured outputs through the served app, with the official OpenAI client.

The app serves a random tiny checkpoint: what it writes means nothing, yet every tool call and
every JSON answer must follow the protocol, because it is decoded under a grammar."""

import json

import httpx
import jsonschema
import openai
import pytest

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather at a location.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                   "required": ["location", "unit"], "additionalProperties": False}}}
NO_ARGS = {"type": "function", "function": {"name": "what_time_is_it", "parameters": {"type": "object", "properties": {}}}}
ASK = [{"role": "user", "content": "What is the weather in San Francisco, CA?"}]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=90)


def arguments_valid(call, tool) -> dict:
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, tool["function"]["parameters"])
    return args


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_tool_call_is_a_valid_call(client, choice):
    raw = client.chat.completions.with_raw_response.create(model="tandem", messages=ASK, tools=[WEATHER, NO_ARGS], tool_choice=choice,
                                                            max_tokens=120)
    r = raw.parse()
    assert raw.headers["x-tandem-structured"] == "tools"
    message = r.choices[0].message
    # a random model never ends a string by itself: near max_tokens the call is closed early, still valid
    assert r.choices[0].finish_reason == "tool_calls", message
    assert message.content is None and message.tool_calls
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        tool = {"get_weather": WEATHER, "what_time_is_it": NO_ARGS}[call.function.name]
        arguments_valid(call, tool)
    if isinstance(choice, dict):
        assert [c.function.name for c in message.tool_calls] == ["get_weather"]


def test_a_tool_without_arguments_gets_an_empty_object(client):
    r = client.chat.completions.create(model="tandem", messages=ASK, tools=[NO_ARGS], max_tokens=80,
                                       tool_choice={"type": "function", "function": {"name": "what_time_is_it"}})
    assert [(c.function.name, json.loads(c.function.arguments)) for c in r.choices[0].message.tool_calls] == [("what_time_is_it", {})]


def test_parallel_tool_calls_false_makes_one_call(client):
    r = client.chat.completions.create(model="tandem", messages=ASK, tools=[WEATHER, NO_ARGS], tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=120)
    assert len(r.choices[0].message.tool_calls) == 1


def test_streamed_tool_call_deltas_join_to_the_whole_call(client):
    kwargs = dict(model="tandem-ar", messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=120)
    whole_choice = client.chat.completions.create(**kwargs).choices[0]
    whole = whole_choice.message.tool_calls
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if delta.id:  # the first delta of a call: index, id, name
                assert delta.function.name and delta.function.arguments == ""
                calls[delta.index] = {"name": delta.function.name, "arguments": ""}
            else:
                calls[delta.index]["arguments"] += delta.function.arguments
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert finish == whole_choice.finish_reason == "tool_calls"
    assert [calls[i] for i in sorted(calls)] == [{"name": c.function.name, "arguments": c.function.arguments} for c in whole]


def test_tool_choice_none_answers_text(client):
    r = client.chat.completions.create(model="tandem-ar", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=8)
    # no grammar, no stop strings: the answer ends at a stop token, or at max_tokens as "length"
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 8 else "stop")


def test_a_tool_result_round_trips_through_the_history(client):
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"location": "SF", "unit": "c"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "It's sunny."},
    ]
    # tool_choice auto needs room for the shortest call (a 400 below it: docs/serving.md, "Running out of tokens")
    r = client.chat.completions.create(model="tandem", messages=history, tools=[WEATHER], max_tokens=80)
    choice = r.choices[0]
    assert (choice.finish_reason == "tool_calls") == bool(choice.message.tool_calls)  # the reason says what the message holds
    for call in choice.message.tool_calls or []:
        assert call.function.name == "get_weather" and arguments_valid(call, WEATHER)
    # the history reached the prompt: the tool call and a longer tool result each cost prompt tokens
    # (counted with tool_choice none: the same prompt, the tools listed, and one token is enough)
    alone = client.chat.completions.create(model="tandem", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=1)
    longer = history[:-1] + [history[-1] | {"content": "It's sunny. " * 8}]
    more = client.chat.completions.create(model="tandem", messages=longer, tools=[WEATHER], tool_choice="none", max_tokens=1)
    assert alone.usage.prompt_tokens < r.usage.prompt_tokens < more.usage.prompt_tokens


@pytest.mark.parametrize("model", ["tandem", "tandem-block", "tandem-verified", "tandem-ar"])
def test_json_schema_answers_validate_in_every_mode(client, model):
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age", "tags"],
              "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}
    r = client.chat.completions.create(model=model, messages=ASK, max_tokens=120,
                                       response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


BAD = [
    ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools[0].function.name", "invalid_value"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strnig"}}}}}]},
     "tools[0].function.parameters", "invalid_schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}}}]},
     "tools[0].function.parameters", "unsupported_schema"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "missing"}}}, "tool_choice", "invalid_value"),
    ({"tool_choice": "required"}, "tool_choice", "invalid_value"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name", "invalid_value"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "if": {"required": ["a"]}, "then": {}}}}},
     "response_format.json_schema.schema", "unsupported_schema"),
    ({"messages": [{"role": "tool", "tool_call_id": "call_nowhere", "content": "x"}]}, "messages[0].tool_call_id", "invalid_request"),
    ({"messages": ASK + [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]},
     "messages[1].tool_calls[0].function.arguments", "invalid_request"),
]


@pytest.mark.parametrize("extra,param,code", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_tools_and_schemas_are_400s_naming_the_field(base_url, extra, param, code):
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem", "messages": ASK, "max_tokens": 4} | extra, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code), error


def test_still_serving_after_bad_tools(client):
    r = client.chat.completions.create(model="tandem-ar", messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=120)
    assert r.choices[0].message.tool_calls
