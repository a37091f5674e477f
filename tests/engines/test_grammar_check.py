"""engines.grammar_check: a grammar's problems named before any decoding, and the field it came from."""

from __future__ import annotations

import json

from engines.grammar_check import grammar_param, grammar_problems


def schema_grammar(schema: dict) -> str:
    return json.dumps({"grammars": [{"json_schema": schema}]})


def test_a_usable_schema_has_no_problems():
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}
    assert grammar_problems(schema_grammar(schema)) == []


def test_a_keyword_the_library_cannot_follow_is_named():
    problems = grammar_problems(schema_grammar({"type": "string", "format": "no-such-format"}))
    assert problems and any("no-such-format" in p for p in problems), problems


def test_a_malformed_grammar_is_a_problem_not_an_exception():
    assert grammar_problems("{not json") != []
    assert grammar_problems(json.dumps({"grammars": [{"lark_grammar": "start: ("}]})) != []


def test_the_field_is_tools_for_lark_and_response_format_for_schemas():
    assert grammar_param(json.dumps({"grammars": [{"lark_grammar": 'start: "x"'}]})) == "tools"
    assert grammar_param(schema_grammar({"type": "string"})) == "response_format"
