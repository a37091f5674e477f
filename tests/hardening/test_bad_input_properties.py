"""Bad input, generated: whatever a client sends to the OpenAI routes - wrong types, huge and
empty strings, invalid UTF-8, deep JSON, unknown fields, out-of-range numbers, oversized bodies -
the answer is a 200 for valid input or OpenAI's error body with a 4xx, never a 5xx."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
VALID_CHAT = {"model": "tandem", "messages": [{"role": "user", "content": "Classify: great phone."}], "max_tokens": 4}
VALID_COMPLETION = {"model": "tandem-ar", "prompt": "The quick brown fox", "max_tokens": 4}
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
def valid_but_slow(value) -> bool:
    """A token budget that is valid but long (null: the 512-token default) on the random tiny model:
    timing, not this test's point; the hardened app's 8 s engine timeout would make it a 503."""
    if value is None:
        return True
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return integral and not isinstance(value, bool) and 64 < value <= 4096


SEEN: dict[str, int] = {}  # status -> count over the module, printed at the end

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**80)
           | st.floats() | st.text(max_size=40) | st.sampled_from(["", " ", "\x00", "\ud800 lone surrogate", "tandem", "ar", "user"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                           max_leaves=16)


def deep(depth: int, leaf="x") -> object:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


class Deep:
    """Nesting `depth` levels deep, built when sent (a small repr for Hypothesis' reports)."""

    def __init__(self, depth: int):
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"


def materialize(value):
    if isinstance(value, Deep):
        return deep(value.depth)
    return value


hostile = (json_values | st.integers(1, 900).map(Deep) | st.sampled_from(["x" * 100_000, "é" * 50_000, "\n" * 20_000])
           | st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "tool", "bot"]), "content": json_values}),
                      max_size=3))


@pytest.fixture(scope="module")
def client(app_url):
    with httpx.Client(base_url=app_url, timeout=60) as c:
        yield c
    print(f"\nbad input: statuses over the module {dict(sorted(SEEN.items()))}")


def post(client: httpx.Client, path: str, body=None, raw: bytes | None = None, headers=None) -> httpx.Response:
    if raw is None:
        raw = json.dumps(body).encode("utf-8", "surrogatepass")  # NaN/Infinity and lone surrogates as Python writes them
    r = client.post(path, content=raw, headers={"content-type": "application/json"} | (headers or {}))
    SEEN[str(r.status_code)] = SEEN.get(str(r.status_code), 0) + 1
    assert r.status_code < 500, f"{r.status_code} for {raw[:300]!r}: {r.text[:300]}"
    if r.status_code == 200:
        return r
    error = r.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and error["type"], r.text[:300]
    assert set(error) == {"message", "type", "param", "code"}
    return r


@SETTINGS
@given(path=st.sampled_from([CHAT, COMPLETIONS]), body=st.dictionaries(st.text(max_size=16), json_values, max_size=6) | json_values)
def test_arbitrary_json(client, path, body):
    post(client, path, body)


@SETTINGS
@given(field=st.sampled_from(sorted(set(VALID_CHAT) | {"temperature", "top_p", "stop", "seed", "n", "stream", "stream_options",
                                                       "response_format", "tools", "max_completion_tokens", "unknown_field"})),
       value=hostile)
def test_one_hostile_field_in_a_valid_chat_request(client, field, value):
    assume(not (field in TOKEN_FIELDS and valid_but_slow(value)))
    post(client, CHAT, VALID_CHAT | {field: materialize(value)})


@SETTINGS
@given(field=st.sampled_from(["model", "prompt", "max_tokens", "temperature", "top_p", "stop", "seed", "stream", "echo"]), value=hostile)
def test_one_hostile_field_in_a_valid_completion_request(client, field, value):
    assume(not (field in TOKEN_FIELDS and valid_but_slow(value)))
    post(client, COMPLETIONS, VALID_COMPLETION | {field: materialize(value)})


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.binary(max_size=300) | st.binary(min_size=1, max_size=40).map(
    lambda b: b'{"model":"tandem","max_tokens":2,"messages":[{"role":"user","content":"' + b + b'"}]}'))
def test_raw_bytes_and_invalid_utf8(client, raw):
    r = post(client, CHAT, raw=raw)
    if r.status_code != 200:
        assert r.status_code == 400


def deep_raw(depth: int, leaf: str = '"x"') -> bytes:
    """`deep(depth)` as JSON, written by hand: json.dumps raises RecursionError past ~1,000 levels."""
    opening = "".join("[" if i % 2 else '{"k":' for i in reversed(range(depth)))
    closing = "".join("]" if i % 2 else "}" for i in range(depth))
    return (opening + leaf + closing).encode()


# Where a client can put deep nesting in a chat request: the whole body, an unknown field, a tool's
# parameters, a response schema, a message's extra field and its content. "@" marks the place.
DEEP_PLACES = {
    "body": "@",
    "unknown": VALID_CHAT | {"metadata": "@"},
    "tools": VALID_CHAT | {"tools": [{"type": "function", "function": {"name": "f", "parameters": "@"}}]},
    "schema": VALID_CHAT | {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"properties": {"a": "@"}}}}},
    "message_extra": VALID_CHAT | {"messages": [{"role": "user", "content": "hi", "name": "@"}]},
    "content": VALID_CHAT | {"messages": [{"role": "user", "content": "@"}]},
}


def test_deep_raw_is_deep_written_by_hand():
    assert all(json.loads(deep_raw(d)) == deep(d) for d in (1, 2, 3, 7))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(depth=st.integers(1, 200_000), where=st.sampled_from(sorted(DEEP_PLACES)))
def test_deep_json(client, depth, where):
    """Nesting of any depth in every place a client can put it (past ~1,000 levels it was once only
    ever sent in `metadata`): never a 500, always OpenAI's error body."""
    raw = json.dumps(DEEP_PLACES[where]).encode().replace(b'"@"', deep_raw(depth))
    post(client, CHAT, raw=raw)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(["seed", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "top_logprobs", "unknown"]),
       digits=st.integers(4_290, 60_000), negative=st.booleans())
def test_integers_beyond_pythons_digit_limit_are_400s(client, field, digits, negative):
    """Any JSON integer over 4,300 digits once made a 500 ValueError (Python's int <-> str limit)."""
    number = ("-" if negative else "") + "7" * digits
    raw = json.dumps(VALID_CHAT | {field: "@"}).encode().replace(b'"@"', number.encode())
    r = post(client, CHAT, raw=raw)
    assert r.status_code in (200, 400) if digits <= 4_300 else r.status_code == 400


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(depth=st.integers(1, 3_000), keyword=st.sampled_from(["not", "items", "anyOf", "additionalProperties"]),
       where=st.sampled_from(["response_format", "tools"]))
def test_schemas_nested_in_any_keyword_are_never_a_500(client, depth, keyword, where):
    """`{"not": {"not": ...}}` 300 deep once made a 500 RecursionError."""
    # written by hand, so every drawn depth is sent: json.dumps raises RecursionError past ~1,000 levels
    # (~2,000 under Hypothesis, which raises the recursion limit; half that for anyOf, two levels each)
    opening, closing = (f'{{"{keyword}":[', "]}") if keyword == "anyOf" else (f'{{"{keyword}":', "}")
    raw_schema = opening * depth + '{"type":"string"}' + closing * depth
    body = (VALID_CHAT | {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "@"}}} if where == "response_format"
            else VALID_CHAT | {"tools": [{"type": "function", "function": {"name": "f", "parameters": "@"}}]})
    raw = json.dumps(body).encode().replace(b'"@"', raw_schema.encode())
    r = post(client, CHAT, raw=raw)
    if depth > 40:
        assert r.status_code == 400, r.text[:300]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 128), description_bytes=st.integers(0, 30_000))
def test_tools_of_any_size_are_served_or_refused_naming_the_field(client, n, description_bytes):
    """A 3 MB `tools` field was once accepted, prompted and logged."""
    from router.gateway.structured import MAX_TOOLS_BYTES

    tools = [{"type": "function", "function": {"name": f"t{i}", "description": "d" * description_bytes}} for i in range(n)]
    r = post(client, CHAT, VALID_CHAT | {"tools": tools, "max_tokens": 2})
    if len(json.dumps(tools, separators=(",", ":"))) > MAX_TOOLS_BYTES and len(json.dumps(VALID_CHAT | {"tools": tools})) < 4 * 2**20:
        assert r.status_code == 413 and r.json()["error"]["param"] == "tools", r.text[:300]


@pytest.mark.parametrize("size_mb", [4.01, 8])
def test_oversized_bodies_are_413_with_or_without_content_length(client, size_mb):
    big = json.dumps(VALID_CHAT | {"messages": [{"role": "user", "content": "x" * int(size_mb * 2**20)}]}).encode()
    assert post(client, CHAT, raw=big).status_code == 413

    def chunks():  # no Content-Length: the gateway has to count
        for i in range(0, len(big), 2**16):
            yield big[i : i + 2**16]

    r = client.post(CHAT, content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_still_serving_after_all_that(client):
    assert post(client, CHAT, VALID_CHAT).status_code == 200
    assert post(client, COMPLETIONS, VALID_COMPLETION).status_code == 200
