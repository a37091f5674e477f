"""Issue 54, item 5, through HTTP against the shared app: every OpenAI or vLLM sampling field Tandem
does not apply is a 400 naming it, while a value that changes nothing is taken; `param` is the
client's field path (`stop`, not pydantic's `stop.str`); the Responses API's errors name its own
fields (`max_output_tokens`, `text.format`, `instructions`), not the chat fields it is served by."""

from __future__ import annotations

import httpx
import pytest

ASK = [{"role": "user", "content": "hi"}]
CHAT = {"model": "tandem-ar", "messages": ASK, "max_tokens": 2}
TEXT = {"model": "tandem-ar", "prompt": "hi", "max_tokens": 2}
RESPONSES = {"model": "tandem-ar", "input": "hi", "max_output_tokens": 2}
SCHEMA = {"type": "object", "properties": {k: {"type": "string"} for k in ("origin", "destination", "date")},
          "required": ["origin", "destination", "date"]}

REFUSED = [  # (endpoint, body, the param the 400 names)
    ("chat/completions", CHAT | {"top_k": 5}, "top_k"),
    ("chat/completions", CHAT | {"min_p": 0.1}, "min_p"),
    ("chat/completions", CHAT | {"repetition_penalty": 1.2}, "repetition_penalty"),
    ("chat/completions", CHAT | {"modalities": ["text", "audio"]}, "modalities"),
    ("chat/completions", CHAT | {"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ("chat/completions", CHAT | {"stream_options": {"include_usage": True}}, "stream_options"),  # without stream
    ("chat/completions", CHAT | {"logit_bias": {"50": 2}}, "logit_bias"),
    ("chat/completions", CHAT | {"stop": 5}, "stop"),
    ("chat/completions", CHAT | {"tool_choice": 5}, "tool_choice"),
    ("completions", TEXT | {"best_of": 2}, "best_of"),
    ("completions", TEXT | {"suffix": "}"}, "suffix"),
    ("completions", TEXT | {"top_k": 40}, "top_k"),
    ("responses", RESPONSES | {"background": True}, "background"),
    ("responses", RESPONSES | {"include": ["message.output_text.logprobs"]}, "include"),
]

TAKEN = [  # values that change nothing
    ("chat/completions", CHAT | {"logit_bias": {"50": 0}, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "modalities": ["text"]}),
    ("chat/completions", CHAT | {"stream": True, "stream_options": {"include_usage": True}}),
    ("completions", TEXT | {"best_of": 1, "suffix": "", "top_k": 0}),
    ("responses", RESPONSES | {"background": False, "include": []}),
]


@pytest.mark.parametrize(("endpoint", "body", "param"), REFUSED)
def test_a_field_that_is_not_applied_is_a_400_naming_it(base_url, endpoint, body, param):
    r = httpx.post(f"{base_url}/v1/{endpoint}", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()


@pytest.mark.parametrize(("endpoint", "body"), TAKEN)
def test_a_value_that_changes_nothing_is_taken(base_url, endpoint, body):
    r = httpx.post(f"{base_url}/v1/{endpoint}", json=body, timeout=60)
    assert r.status_code == 200, r.text


def test_responses_errors_name_responses_fields(base_url):
    fmt = {"format": {"type": "json_schema", "name": "trip", "schema": SCHEMA}}
    r = httpx.post(f"{base_url}/v1/responses", json=RESPONSES | {"text": fmt, "max_output_tokens": 4}, timeout=60)
    error = r.json()["error"]
    assert r.status_code == 400 and error["param"] == "max_output_tokens", error
    assert error["message"].startswith("max_output_tokens 4 is below") and "max_tokens" not in error["message"].replace("max_output_tokens", "")
    bad = {"format": {"type": "json_schema", "name": "trip", "schema": {"type": "object", "properties": {"a": {"type": "string", "not": {}}}}}}
    r = httpx.post(f"{base_url}/v1/responses", json=RESPONSES | {"text": bad}, timeout=60)
    error = r.json()["error"]
    assert r.status_code == 400 and error["param"] == "text.format.schema" and "response_format" not in error["message"], error
    r = httpx.post(f"{base_url}/v1/responses", json=RESPONSES | {"instructions": "x" * 10, "max_output_tokens": "4"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_output_tokens", r.json()


def test_a_stored_response_says_so_and_one_asked_not_to_be_stored_says_that(base_url):
    for store in (True, False):
        r = httpx.post(f"{base_url}/v1/responses", json=RESPONSES | {"store": store}, timeout=60)
        assert r.status_code == 200 and r.json()["store"] is store, r.text
