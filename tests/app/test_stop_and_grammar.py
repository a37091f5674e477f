"""Issue 54's structured-answer promises, through HTTP against the shared app (tests/app/conftest.py:
a random tiny checkpoint, so values mean nothing, yet every answer under a grammar must keep them):

1. a `stop` string never cuts a constrained span: over {json_schema, tools required, tools auto} x
   {'"', ':', '}', ', '} x {stream, not} x {ar, block, verified} every answer is a 200 that
   validates (no 422, no cut JSON, no call left as text); under `auto` a text answer is still cut
   by the stop string (the rule in docs/serving.md: stops apply only outside the constrained span);
2. no tools request answers an empty 200: `tool_choice: auto` with `max_tokens` under the shortest
   call is a 400 naming the minimum, as `required` is, in every mode, and that minimum is served; a
   call the grammar's closer cannot end (an e-mail `pattern`) is a 400 naming `tools`, not an
   answer with the tool silently gone."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest

from tests.app.helpers import FOUR_FIELDS, MODES, WEATHER, answer, json_schema

STOPS = ['"', ":", "}", ", "]
KINDS = {
    "json_schema": {"response_format": json_schema(FOUR_FIELDS)},
    "required": {"tools": [WEATHER], "tool_choice": "required"},
    "auto": {"tools": [WEATHER], "tool_choice": "auto"},
}
EMAIL = {"type": "function", "function": {"name": "send_mail", "parameters": {
    "type": "object", "properties": {"to": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"}}, "required": ["to"]}}}


def assert_valid(kind: str, got: dict, stop: str) -> None:
    if kind == "json_schema":
        jsonschema.validate(json.loads(got["content"]), FOUR_FIELDS)
        return
    if kind == "required" or got["tool_calls"]:
        assert got["tool_calls"] and not got["content"], got  # a call, never left as text
        assert got["finish_reason"] == "tool_calls", got
        for call in got["tool_calls"]:
            jsonschema.validate(json.loads(call["arguments"]), WEATHER["function"]["parameters"])
        return
    # auto, answered in text: the stop string applies there (outside the constrained span)
    assert got["content"] and not got["content"].startswith("<") and stop not in got["content"], got


@pytest.mark.parametrize("model", MODES)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_stop_string_never_cuts_a_constrained_answer(base_url, kind, stream, model):
    for stop in STOPS:
        r, got = answer(base_url, KINDS[kind] | {"model": model, "stream": stream, "stop": [stop], "max_tokens": 64})
        assert r.status_code == 200, (stop, r.status_code, r.text)
        assert_valid(kind, got, stop)


def refusal(r: httpx.Response) -> dict:
    assert r.status_code == 400, r.text
    return r.json()["error"]


@pytest.mark.parametrize("model", MODES)
def test_auto_under_the_shortest_call_is_a_400_naming_the_minimum_and_the_minimum_is_served(base_url, model):
    required = refusal(answer(base_url, {"model": model, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 4})[0])
    shortest = int(re.search(r"ask for at least (\d+)", required["message"]).group(1))
    for stream in (False, True):
        r, _ = answer(base_url, KINDS["auto"] | {"model": model, "stream": stream, "max_tokens": shortest - 1})
        error = refusal(r)
        assert (error["param"], error["code"]) == ("max_tokens", "max_tokens_too_small"), error
        assert f"ask for at least {shortest}" in error["message"] and "shortest tool call" in error["message"], error
    r, got = answer(base_url, KINDS["auto"] | {"model": model, "max_tokens": shortest})
    assert r.status_code == 200 and (got["tool_calls"] or got["content"]), got  # never an empty stop


def test_auto_with_a_call_no_answer_can_end_is_a_400_naming_the_tools(base_url):
    for stream in (False, True):
        r, _ = answer(base_url, {"model": "tandem-ar", "stream": stream, "tools": [EMAIL], "tool_choice": "auto", "max_tokens": 256})
        assert refusal(r)["param"] == "tools"
