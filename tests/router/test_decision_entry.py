"""What a decisions-log entry keeps of a request (router.gateway.decision_entry): numeric features and
sizes without text, and opt-in text cut to a byte budget in a fixed order (tools to their names,
response_format to its type, messages to a head and a tail), saying what was cut."""

from __future__ import annotations

import json

from router.decision.features import FEATURE_VERSION, NUMERIC_FEATURES
from router.decision.types import RouteRequest
from router.gateway.decision_entry import MIN_LIMIT_CHARS, compact_json, cut_text, request_features, stored_features, utf8_bytes

TOOL = {"type": "function", "function": {"name": "lookup", "description": "d" * 2000, "parameters": {"type": "object"}}}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "card", "schema": {"type": "object", "description": "s" * 2000}}}


def request(user: str = "Extract the city: Ada lives in Paris.", **kw) -> dict:
    return request_features(RouteRequest(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": user}], **kw))


def test_stored_features_hold_sizes_and_the_vector_but_no_text():
    r = request(tools=[TOOL], response_format=SCHEMA_FORMAT, stop="\n", max_tokens=32)
    assert r["stop"] == ["\n"]
    f = stored_features(r)
    assert "Paris" not in json.dumps(f) and "lookup" not in json.dumps(f)
    assert f["feature_version"] == FEATURE_VERSION and list(f["numeric"]) == list(NUMERIC_FEATURES)
    assert (f["messages"], f["tools"], f["stop"], f["max_tokens"], f["response_format"]) == (2, 1, 1, 32, "json_schema")
    assert f["tools_bytes"] == utf8_bytes(compact_json([TOOL])) and f["schema_bytes"] > 2000
    assert f["prompt_chars"] == len("Be brief.") + len("Extract the city: Ada lives in Paris.")
    assert stored_features(request(response_format={"type": "grammar"}))["response_format"] == "other"


def test_text_that_fits_is_kept_whole():
    text, was_cut = cut_text(request(), 4096)
    assert not was_cut and text["messages"][1] == {"role": "user", "content": "Extract the city: Ada lives in Paris."}


def test_tools_are_cut_to_their_names_first_then_the_schema_to_its_type():
    r = request(tools=[TOOL], response_format=SCHEMA_FORMAT)
    text, was_cut = cut_text(r, 1500)  # the tools alone are over it; without them the schema still is
    assert was_cut and text["tools"] == [{"type": "function", "function": {"name": "lookup"}}]
    assert text["cut"]["tools"]["kept"] == "names" and text["response_format"] == {"type": "json_schema"}
    assert text["messages"][1]["content"].endswith("Paris.") and "messages" not in text["cut"]
    assert utf8_bytes(compact_json(text)) <= 1500


def test_long_messages_keep_a_head_and_a_tail_and_too_many_are_dropped_whole():
    long = "HEAD " + "x" * 20_000 + " TAIL"
    text, was_cut = cut_text(request(long), 2048)
    content = text["messages"][1]["content"]
    assert was_cut and content.startswith("HEAD") and content.endswith("TAIL") and " ... " in content
    assert text["cut"]["messages"]["chars_cut"] == len(long) + len("Be brief.") - sum(len(m["content"]) for m in text["messages"])
    assert utf8_bytes(compact_json(text)) <= 2048
    many = {"messages": [{"role": "user", "content": "y" * 500}] * 100}
    dropped, was_cut = cut_text(many, 1024)
    assert was_cut and set(dropped) == {"cut"} and dropped["cut"]["all"]["bytes"] > 100 * MIN_LIMIT_CHARS
