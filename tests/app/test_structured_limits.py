"""Issue 35's structured-answer and hostile-header defects, through HTTP against the shared app
(tests/app/conftest.py: a random tiny checkpoint, so values mean nothing, yet every answer under a
grammar must keep its promise):

2. `tool_choice: "required"` or a named tool returns a call whose arguments validate, in every
   mode, streamed or not; the issue's exact case (two tools, max_tokens 32 or 40) included;
3. a `pattern` a closing quote cannot satisfy (`(a+)+$`) still ends valid;
4. schemas with no answer, or that the grammar library cannot build, are a 400 before decoding,
   streamed or not;
5. max_tokens below the schema's shortest answer: a 400 naming both numbers (the rule, in
   docs/serving.md), and that shortest budget is then served;
6. OpenAI's integer fields take integers only, in chat, completions and the Responses API;
7. an x-request-id over 128 characters is refused before anything echoes or keeps it;
8. the docs say what the code does (tool_choice auto's route, the Responses API's TTL);
and a property test: every answer to a generated schema or tool set with max_tokens 1..256 is
valid, or the request was refused with a 400 before any decoding (a stream never started)."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import httpx
import jsonschema
import pytest
import redis
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.engines.grammar.closer_cases import choices, schemas, tools
from tests.app.helpers import ASK, FOUR_FIELDS, MODES, WEATHER, answer, json_schema

DOCS = Path(__file__).resolve().parents[2] / "docs"
FLIGHTS = {"type": "function", "function": {"name": "search_flights", "description": "Search flights.", "parameters": {
    "type": "object", "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}, "passengers": {"type": "integer"}},
    "required": ["origin", "destination", "passengers"]}}}
TOOLS = {t["function"]["name"]: t for t in (FLIGHTS, WEATHER)}


def refused_before_decoding(r: httpx.Response, code: str | None = None) -> dict:
    """A 400 in OpenAI's error shape, a plain JSON answer (a stream that started would be a 200)."""
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and (code is None or error["code"] == code), error
    return error


def shortest(base_url: str, body: dict) -> int:
    """The shortest answer's tokens, as the 400 for max_tokens 1 names them."""
    r, _ = answer(base_url, body | {"max_tokens": 1})
    error = refused_before_decoding(r, "max_tokens_too_small")
    assert error["param"] == "max_tokens" and "max_tokens 1 " in error["message"]
    return int(re.search(r"ask for at least (\d+)", error["message"]).group(1))


def valid_calls(got: dict, names: set[str]) -> None:
    assert got["content"] is None and got["tool_calls"], got
    for call in got["tool_calls"]:
        assert call["name"] in names
        jsonschema.validate(json.loads(call["arguments"]), TOOLS[call["name"]]["function"]["parameters"])


# ---- 2. a required or named tool call is always a valid call ---------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("model", MODES)
@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "search_flights"}}], ids=["required", "named"])
def test_a_forced_tool_call_is_a_call_whose_arguments_validate(base_url, model, stream, choice):
    body = {"model": model, "tools": [FLIGHTS, WEATHER], "tool_choice": choice, "stream": stream}
    need = shortest(base_url, body)
    names = {"search_flights"} if isinstance(choice, dict) else set(TOOLS)
    for budget in (need, need + 8):  # at the very edge (the closer writes it all) and with room for the model
        r, got = answer(base_url, body | {"max_tokens": budget})
        assert r.status_code == 200, r.text
        valid_calls(got, names)
        assert got["finish_reason"] == "tool_calls"
    r, _ = answer(base_url, body | {"max_tokens": need - 1})
    error = refused_before_decoding(r, "max_tokens_too_small")
    assert f"max_tokens {need - 1} is below the {need} tokens" in error["message"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_issues_case_two_tools_and_max_tokens_32_or_40_never_answers_text(base_url, stream):
    for budget in (32, 40):
        r, got = answer(base_url, {"model": "tandem-ar", "tools": [FLIGHTS, WEATHER], "tool_choice": "required", "max_tokens": budget,
                                   "stream": stream})
        if r.status_code == 200:
            valid_calls(got, set(TOOLS))
        else:  # this checkpoint's tokens are about a character each: the shortest call does not fit
            assert f"max_tokens {budget} is below" in refused_before_decoding(r, "max_tokens_too_small")["message"]


# ---- 3. a pattern a quote cannot end -----------------------------------------------------------------------


@pytest.mark.parametrize("model", MODES)
def test_a_pattern_string_ends_valid_at_every_budget(base_url, model):
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a+)+$"}}, "required": ["s"]}
    for budget, stream in ((16, False), (32, True), (64, False), (128, True)):
        r, got = answer(base_url, {"model": model, "response_format": json_schema(schema), "max_tokens": budget, "stream": stream})
        assert r.status_code == 200, r.text
        jsonschema.validate(json.loads(got["content"]), schema)
        assert got["finish_reason"] == "stop"


# ---- 4. no answer at all: a 400 before decoding ---------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("schema", [
    {"$ref": "#"},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a{1000000}$"}}, "required": ["s"]},
], ids=["ref-to-itself", "ref-loop", "a-million-a"])
def test_a_schema_with_no_answer_is_a_400_before_decoding(base_url, schema, stream):
    for model in MODES:
        r, _ = answer(base_url, {"model": model, "response_format": json_schema(schema), "max_tokens": 64, "stream": stream})
        assert refused_before_decoding(r)["code"] in ("unsatisfiable_schema", "invalid_schema")


# ---- 5. max_tokens below the shortest answer -------------------------------------------------------------------


@pytest.mark.parametrize("model", MODES)
def test_max_tokens_below_the_shortest_answer_is_a_400_naming_both_then_that_budget_is_served(base_url, model):
    body = {"model": model, "response_format": json_schema(FOUR_FIELDS)}
    need = shortest(base_url, body)
    for stream in (False, True):
        r, _ = answer(base_url, body | {"max_tokens": need - 1, "stream": stream})
        assert f"max_tokens {need - 1} is below the {need} tokens" in refused_before_decoding(r, "max_tokens_too_small")["message"]
        r, got = answer(base_url, body | {"max_tokens": need, "stream": stream})
        assert r.status_code == 200 and got["finish_reason"] == "stop", r.text
        jsonschema.validate(json.loads(got["content"]), FOUR_FIELDS)


# ---- 6. strict types -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "field", "value"), [
    ("chat/completions", "max_tokens", "12"), ("chat/completions", "max_tokens", 12.0), ("chat/completions", "max_tokens", True),
    ("chat/completions", "max_completion_tokens", "12"), ("chat/completions", "n", "1"), ("chat/completions", "n", True),
    ("chat/completions", "seed", 7.5), ("chat/completions", "seed", "7"), ("chat/completions", "top_logprobs", "2"),
    ("chat/completions", "temperature", "0.5"), ("chat/completions", "temperature", True), ("chat/completions", "stream", "true"),
    ("completions", "max_tokens", "12"), ("completions", "logprobs", True), ("completions", "seed", 1.0),
    ("responses", "max_output_tokens", "12"), ("responses", "max_output_tokens", 12.0), ("responses", "temperature", "1"),
])
def test_numeric_fields_take_their_own_type_only(base_url, path, field, value):
    body = {"chat/completions": {"messages": ASK, "logprobs": True}, "completions": {"prompt": "Hello"}, "responses": {"input": "Hello"}}[path]
    r = httpx.post(f"{base_url}/v1/{path}", json={"model": "tandem-ar", "max_tokens": 4, **body, field: value}, timeout=60)
    error = refused_before_decoding(r, "invalid_type")
    assert error["param"] == field


def test_integers_for_numbers_are_fine(base_url):
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem-ar", "messages": ASK, "max_tokens": 4, "temperature": 1,
                                                            "top_p": 1, "seed": 3, "n": 1}, timeout=60)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_seeded_answer_says_how_many_slot_tokens_block_and_ar_wrote(base_url, stream):
    # issue 37: `tandem` keeps `forwards` and, for a skeleton-seeded answer, adds where its slot tokens came from
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 4}}, "required": ["code"]}  # fits the 32-token canvas
    body = {"response_format": json_schema(schema), "max_tokens": 40, "stream": stream}
    r, got = answer(base_url, body | {"model": "tandem-block"})
    assert r.status_code == 200 and got["tandem"]["mode"] == "block", got
    jsonschema.validate(json.loads(got["content"]), schema)
    t = got["tandem"]
    assert isinstance(t["forwards"], int) and isinstance(t["slot_tokens_block"], int) and isinstance(t["slot_tokens_ar"], int)
    assert t["slot_tokens_ar"] < t["forwards"]  # AR's tokens each took a call of their own, the canvas's did not
    _, plain = answer(base_url, body | {"model": "tandem-ar"})
    assert "slot_tokens_block" not in plain["tandem"] and "slot_tokens_ar" not in plain["tandem"]  # not a seeded answer


# ---- 7. request ids --------------------------------------------------------------------------------------------


def test_a_long_request_id_is_refused_everywhere(base_url, admin_headers, serve_app):
    for long_id in ("r" * 129, "x" * 30_000):
        for path, body in (("chat/completions", {"messages": ASK}), ("completions", {"prompt": "Hi"}), ("responses", {"input": "Hi"})):
            r = httpx.post(f"{base_url}/v1/{path}", json={"model": "tandem-ar", "max_tokens": 4, **body}, headers={"x-request-id": long_id},
                           timeout=60)
            assert refused_before_decoding(r, "invalid_request_id")["param"] == "x-request-id"
            assert "x-request-id" not in r.headers and len(r.text) < 1000  # refused in the proxy, before it echoes the id; not in the body
    feed = httpx.get(f"{base_url}/admin/decisions", headers=admin_headers, timeout=30).json()["decisions"]
    assert all(len(e["request_id"]) <= 128 for e in feed)

    ok = uuid.uuid4().hex * 4  # 128 characters: used, echoed and kept whole
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem-ar", "messages": ASK, "max_tokens": 4},
                   headers={"x-request-id": ok}, timeout=60)
    assert r.status_code == 200 and r.json()["id"] == ok and r.headers["x-request-id"] == ok
    feed = httpx.get(f"{base_url}/admin/decisions", headers=admin_headers, timeout=30).json()["decisions"]
    assert ok in [e["request_id"] for e in feed]
    client = redis.Redis.from_url(serve_app["redis_url"], decode_responses=True)
    deadline, logged = time.time() + 30, []
    while not logged and time.time() < deadline:  # logged off the request path
        logged = [e for _, e in client.xrevrange(f"{serve_app['prefix']}decisions", count=50) if json.loads(e["decision"])["request_id"] == ok]
        time.sleep(0.1)
    client.close()
    assert logged, "the 128-character id never reached the decisions log whole"


# ---- 8. the docs say what the code does ------------------------------------------------------------------------


def test_tool_choice_auto_goes_to_skeleton_mode_as_the_docs_say(base_url, admin_headers):
    policy = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=30).json()["policy"]
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem", "messages": ASK, "tools": [WEATHER], "tool_choice": "auto",
                                                            "max_tokens": 128}, timeout=120)
    # the skeleton rule decides between skeleton_mode and constrained_mode (by agreement and price) and says so
    assert r.status_code == 200 and r.headers["x-tandem-route-reason"] == "skeleton", r.headers
    assert r.headers["x-tandem-mode"] in (policy["skeleton_mode"], policy["constrained_mode"]), r.headers
    assert r.headers["x-tandem-route-trace"].endswith(f"skeleton:{r.headers['x-tandem-mode']}"), r.headers
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem", "messages": ASK, "response_format": {"type": "json_object"},
                                                            "max_tokens": 64}, timeout=120)
    assert r.status_code == 200 and r.headers["x-tandem-mode"] == policy["constrained_mode"], r.headers
    serving = " ".join((DOCS / "serving.md").read_text().split())
    assert "a call the model *may* make (`tool_choice: auto` without a JSON `response_format`" in serving
    assert "These go to the policy's `skeleton_mode`" in serving and "else `constrained_mode` (trace `skeleton:ar`" in serving


def test_the_responses_api_keeps_conversations_for_the_ttl_operations_md_names(base_url, serve_app):
    from router.app import AppArgs

    ttl = AppArgs().responses_ttl_s
    section = (DOCS / "operations.md").read_text().split("## 8. Security and data handling")[1]
    assert "conversations (Responses API)" in section and f"{ttl:,} s" in section and "responses_ttl_s" in section
    r = httpx.post(f"{base_url}/v1/responses", json={"model": "tandem-ar", "input": "Hello", "max_output_tokens": 4}, timeout=60)
    assert r.status_code == 200, r.text
    client = redis.Redis.from_url(serve_app["redis_url"])
    assert ttl - 60 < client.ttl(f"{serve_app['prefix']}response:{r.json()['id']}") <= ttl
    client.close()


# ---- the property: valid, or a 400 before decoding -------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), model=st.sampled_from(["tandem", *MODES]), max_tokens=st.integers(1, 256), stream=st.booleans())
def test_every_answer_validates_or_is_a_400_before_decoding(base_url, data, model, max_tokens, stream):
    body = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if data.draw(st.booleans(), label="tools"):
        tools_, choice = data.draw(tools), data.draw(choices)
        named = {"type": "function", "function": {"name": tools_[0]["function"]["name"]}}
        body |= {"tools": tools_, "tool_choice": named if choice == "named" else choice}
        schema = None
    else:
        schema = data.draw(schemas)
        body |= {"response_format": json_schema(schema)}
    r, got = answer(base_url, body)
    event(f"{'refused' if got is None else 'served'}{' (closed early)' if got and got['tandem']['closed_early'] else ''}")
    if got is None:
        error = refused_before_decoding(r)
        if error["code"] == "context_length_exceeded":  # the tool definitions alone can fill the tiny model's context
            prompt, asked, context = (int(n) for n in re.search(r"prompt of (?:at least )?(\d+) tokens plus max_tokens (\d+) exceeds the context of (\d+)",
                                                                error["message"]).groups())
            assert asked == max_tokens and prompt + asked > context, error
            return
        assert error["code"] in ("max_tokens_too_small", "unsupported_schema", "invalid_schema"), error
        return
    assert got["finish_reason"] in ("stop", "tool_calls"), got
    if schema is not None:
        jsonschema.validate(json.loads(got["content"]), schema)
    elif got["tool_calls"]:
        for call in got["tool_calls"]:
            tool = next(t for t in body["tools"] if t["function"]["name"] == call["name"])
            jsonschema.validate(json.loads(call["arguments"]), tool["function"]["parameters"])
    else:
        assert body["tool_choice"] == "auto" and not got["content"].startswith("<")
