"""The Responses API through the served app, with the official OpenAI client: text, a forced
function call and its output sent back, JSON text.format, streaming events, previous_response_id."""

import json

import httpx
import jsonschema
import openai
import pytest

TOOL = {"type": "function", "name": "get_weather", "description": "Get the weather at a location.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"], "additionalProperties": False},
        "strict": True}


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=90)


def test_text_in_text_out(client):
    r = client.responses.create(model="tandem-ar", input="Say hi.", instructions="Be brief.", max_output_tokens=8)
    assert r.object == "response" and r.output[0].type == "message"
    assert 0 < r.usage.output_tokens <= 8 and r.usage.input_tokens > 0
    # incomplete exactly when the answer used the whole max_output_tokens (chat's finish_reason length)
    assert (r.status, r.incomplete_details and r.incomplete_details.reason) == (
        ("incomplete", "max_output_tokens") if r.usage.output_tokens == 8 else ("completed", None))


def test_a_function_call_and_its_output_round_trip(client):
    # 80: the shortest call is 61 of this checkpoint's tokens (about a character each); under it the request is a 400
    first = client.responses.create(model="tandem", input="What is the weather in Paris?", tools=[TOOL], tool_choice="required",
                                    max_output_tokens=80)
    calls = [item for item in first.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    jsonschema.validate(json.loads(calls[0].arguments), TOOL["parameters"])
    items = [{"role": "user", "content": "What is the weather in Paris?"}, calls[0].model_dump(exclude_none=True),
             {"type": "function_call_output", "call_id": calls[0].call_id, "output": "It's sunny."}]
    second = client.responses.create(model="tandem-ar", input=items, tools=[TOOL], tool_choice="none", max_output_tokens=8)
    assert second.output[0].type == "message"


def test_json_schema_text_format_validates(client):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
    r = client.responses.create(model="tandem", input="Where is the Louvre?", max_output_tokens=40,
                                text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.output_text), schema)


def test_streaming_events_arrive_in_order(client):
    events = [e.type for e in client.responses.create(model="tandem-ar", input="Say hi.", max_output_tokens=8, stream=True)]
    assert events[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in events and events[-1] in ("response.completed", "response.incomplete")


def test_previous_response_id_continues_a_stored_conversation(client, base_url):
    first = client.responses.create(model="tandem-ar", input="My name is Ada.", max_output_tokens=4)
    second = client.responses.create(model="tandem-ar", input="What is my name?", previous_response_id=first.id, max_output_tokens=4)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens  # the stored turns were put before the input
    r = httpx.post(f"{base_url}/v1/responses", json={"model": "tandem", "input": "x", "previous_response_id": "resp_nowhere"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "previous_response_id"


def test_unsupported_tool_types_are_400s(base_url):
    r = httpx.post(f"{base_url}/v1/responses", json={"model": "tandem", "input": "x", "tools": [{"type": "web_search"}]}, timeout=30)
    assert r.status_code == 400 and "web_search" in r.json()["error"]["message"]


def test_a_streamed_response_is_stored_and_continued(client):
    stream = client.responses.create(model="tandem-ar", input="My name is Ada.", max_output_tokens=4, stream=True)
    done = [e for e in stream if e.type in ("response.completed", "response.incomplete", "response.failed")]
    assert [e.type for e in done] != ["response.failed"] and len(done) == 1
    first = done[0].response
    second = client.responses.create(model="tandem-ar", input="What is my name?", previous_response_id=first.id, max_output_tokens=4)
    assert second.previous_response_id == first.id and second.usage.input_tokens > first.usage.input_tokens
