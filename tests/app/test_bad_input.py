"""Bad input gets OpenAI's error body with the right status, never a 5xx."""

import httpx
import pytest

URL = "/v1/chat/completions"
OK = {"model": "tandem", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}

CASES = [
    ({**OK, "messages": []}, 400, "messages"),
    ({**OK, "messages": "hi"}, 400, "messages"),
    ({**OK, "messages": [{"role": "wizard", "content": "x"}]}, 400, "messages"),
    ({**OK, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400, "messages"),
    ({**OK, "n": 2}, 400, "n"),
    ({**OK, "temperature": -1}, 400, "temperature"),
    ({**OK, "temperature": "hot"}, 400, "temperature"),
    ({**OK, "top_p": 0}, 400, "top_p"),
    ({**OK, "max_tokens": 0}, 400, "max_tokens"),
    ({**OK, "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ({**OK, "response_format": {"type": "json_schema"}}, 400, "response_format"),
    ({**OK, "logit_bias": {"17": -100}}, 400, "logit_bias"),  # would change the answer, and is not applied: never ignored
    ({**OK, "presence_penalty": 0.5}, 400, "presence_penalty"),
    ({**OK, "model": "gpt-4o"}, 404, "model"),
    ({**OK, "max_tokens": 100_000}, 400, None),  # beyond the model's context
]


@pytest.mark.parametrize(("body", "status", "param"), CASES)
def test_bad_bodies(base_url, body, status, param):
    r = httpx.post(base_url + URL, json=body, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["message"] and error["type"]
    if param:
        assert error["param"] and error["param"].startswith(param)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe\x00", b'"just a string"', b""])
def test_malformed_json(base_url, raw):
    r = httpx.post(base_url + URL, content=raw, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_json"


def test_oversized_body_is_413(base_url):
    big = {**OK, "messages": [{"role": "user", "content": "x" * (5 * 1024 * 1024)}]}
    r = httpx.post(base_url + URL, json=big, timeout=60)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"


def test_unknown_route_and_method(base_url):
    assert httpx.get(base_url + "/v1/nope").status_code == 404
    assert "error" in httpx.get(base_url + "/v1/nope").json()
    assert httpx.get(base_url + URL).status_code == 405


def test_mode_header_with_a_bad_value(base_url):
    r = httpx.post(base_url + URL, json=OK, headers={"x-tandem-mode": "warp"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-tandem-mode"


def test_still_serving_after_all_that(base_url):
    assert httpx.post(base_url + URL, json={**OK, "model": "tandem-ar"}, timeout=30).status_code == 200


def test_remote_schema_ref_is_refused_and_never_fetched(base_url):
    from tests.listener import Listener

    with Listener(delay_s=5.0) as listener:
        schema = {"type": "object", "properties": {"a": {"$ref": f"{listener.url}/slow.json"}}}
        body = {**OK, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
        r = httpx.post(base_url + URL, json=body, timeout=30)
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == "invalid_schema" and "is not local" in error["message"]
        assert listener.hits == []


def test_deeply_nested_schema_is_a_400(base_url):
    schema = {"type": "string"}
    for _ in range(300):
        schema = {"not": schema}
    body = {**OK, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    r = httpx.post(base_url + URL, json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == "invalid_schema"


def test_a_streamed_json_answer_matches_its_schema(base_url):
    """response_format holds for streams too: the answer is decoded under the schema's grammar, so
    the streamed text joins to JSON matching it (closed early, as valid JSON, when max_tokens runs out)."""
    import json

    import jsonschema

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    body = {**OK, "max_tokens": 40, "stream": True, "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}}
    with httpx.stream("POST", base_url + URL, json=body, timeout=60) as r:
        assert r.status_code == 200
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                       for line in r.iter_lines() if line.startswith("data: {") and '"choices":[{' in line)
    jsonschema.validate(json.loads(text), schema)


BIG_SEED = b'{"model": "tandem", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], "seed": ' + b"9" * 5000 + b"}"
LONE_SURROGATE = b'{"model": "tandem", "max_tokens": 2, "messages": [{"role": "user", "content": "\\ud800 x"}]}'


@pytest.mark.parametrize("raw", [BIG_SEED, LONE_SURROGATE], ids=["integer-over-4300-digits", "lone-surrogate"])
def test_hostile_values_are_400s(base_url, raw):
    r = httpx.post(base_url + URL, content=raw, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
