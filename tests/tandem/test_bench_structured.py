"""`tandem bench structured`'s hand-written realistic sets: what they hold and how an answer is judged."""

from __future__ import annotations

import json

import jsonschema

from tandem.bench.structured import build_cases, judge, realistic_cases


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def _enums(schema: dict) -> set[str]:
    return {e for p in schema.get("properties", {}).values() for e in p.get("enum", [])}


def test_the_realistic_sets_hold_thirty_requests_whose_answers_are_in_their_text():
    cases = realistic_cases(1000)
    schema, tools = cases["realistic/schema"], cases["realistic/tools"]
    assert len(schema) + len(tools) >= 30 and len(tools) >= 10
    assert len({c.item for c in schema + tools}) == len(schema) + len(tools)  # ids unique
    for c in schema:
        jsonschema.validate(c.want_fields, c.schema)
        text = "\n".join(m["content"] for m in c.body["messages"])
        assert all(v in text for v in _strings(c.want_fields) if v not in _enums(c.schema)), c.item  # copied, not recalled
    for c in tools:
        (call,) = c.want_calls
        jsonschema.validate(call["arguments"], c.tool_params[call["name"]])
        text = "\n".join(m["content"] for m in c.body["messages"])
        assert all(v in text for v in _strings(call["arguments"]) if v not in _enums(c.tool_params[call["name"]])), c.item
        assert c.body["tool_choice"] == "auto" and len(c.body["tools"]) == len(c.tool_params)


def test_build_cases_takes_n_of_each_realistic_kind():
    cases = build_cases(3, 0)
    assert len(cases["realistic/schema"]) == 3 and len(cases["realistic/tools"]) == 3


def _calling(*calls) -> dict:
    tool_calls = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in enumerate(calls)]
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": tool_calls}}]}


def _free_string(case, name: str) -> str | None:
    """An argument of `name` that takes any string (so "zz-not-it" is valid but wrong)."""
    props = case.tool_params[name]["properties"]
    return next((k for k, p in props.items() if p.get("type") == "string" and "enum" not in p and "format" not in p), None)


def test_a_tool_answer_scores_the_share_of_the_reference_arguments():
    case = next(c for c in realistic_cases(1000)["realistic/tools"]
                if len(c.want_calls[0]["arguments"]) >= 2 and _free_string(c, c.want_calls[0]["name"]))
    want = case.want_calls[0]
    assert judge(case, _calling((want["name"], want["arguments"]))) == {"valid": True, "exact": 1.0, "fields": 1.0, "decided": True}

    wrong = want["arguments"] | {_free_string(case, want["name"]): "zz-not-it"}
    got = judge(case, _calling((want["name"], wrong)))
    assert got == {"valid": True, "exact": 0.0, "fields": (len(wrong) - 1) / len(wrong), "decided": True}

    other = next((n for n in case.tool_params if n != want["name"]), None)
    if other is not None:  # the wrong tool gets no credit for its arguments
        assert judge(case, _calling((other, want["arguments"])))["fields"] == 0.0
    text_only = {"choices": [{"message": {"role": "assistant", "content": "Sure, done."}}]}
    assert judge(case, text_only) == {"valid": True, "exact": 0.0, "fields": 0.0, "decided": False}


def test_a_schema_answer_scores_the_share_of_equal_fields():
    case = next(c for c in realistic_cases(1000)["realistic/schema"] if len(c.want_fields) == 2)
    _, k2 = case.want_fields
    half = {"choices": [{"message": {"content": json.dumps(case.want_fields | {k2: "zz-not-it" if isinstance(case.want_fields[k2], str) else -1})}}]}
    got = judge(case, half)
    assert got["fields"] == got["exact"] == 0.5 and got["decided"] is None
    assert judge(case, {"choices": [{"message": {"content": "not json"}}]})["fields"] == 0.0
