"""Tool definitions and output grammars (router.gateway.structured), read back with
router.gateway.tool_calls: the grammar accepts exactly what the chat template writes, and bad
definitions are 400s naming the field (streamed calls: tests/router/test_tool_calls.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import llguidance
import llguidance.hf
import pytest
from transformers import AutoTokenizer

from engines.defaults import SHIPPED_CHECKPOINT
from engines.errors import InvalidRequestError
from router.gateway.structured import output_spec
from router.gateway.tool_calls import read_answer

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather at a place.", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}}, "required": ["location"]}}}
PING = {"type": "function", "function": {"name": "ping"}}


def spec(tools=None, choice=None, parallel=None, fmt=None):
    return output_spec(SimpleNamespace(tools=tools, tool_choice=choice, parallel_tool_calls=parallel, response_format=fmt))


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT)


def accepts(tokenizer, grammar: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(llguidance.hf.from_tokenizer(tokenizer), grammar, log_level=0)
    return all(matcher.consume_token(t) for t in tokenizer.encode(text, add_special_tokens=False)) and matcher.is_accepting()


def template_answer(tokenizer, calls: list[dict]) -> str:
    """What the chat template writes for an assistant turn with these calls (history)."""
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": calls}],
                                             tokenize=False)
    return rendered.split("<start_of_turn>model\n", 1)[1].removesuffix("<end_of_turn>\n")


def test_the_grammar_accepts_what_the_template_writes(tokenizer):
    calls = [{"name": "get_weather", "arguments": {"location": "東京", "days": 3}}, {"name": "ping", "arguments": {}}]
    text = template_answer(tokenizer, calls)
    assert accepts(tokenizer, spec([WEATHER, PING], "required").grammar, text)
    content, read = read_answer(text, True)
    assert content is None and [(c.name, json.loads(c.arguments)) for c in read] == [(c["name"], c["arguments"]) for c in calls]


def test_choices_shape_the_grammar(tokenizer):
    one = template_answer(tokenizer, [{"name": "get_weather", "arguments": {"location": "Oslo"}}])
    two = one + template_answer(tokenizer, [{"name": "ping", "arguments": {}}])
    auto, required = spec([WEATHER, PING], "auto"), spec([WEATHER, PING], "required")
    assert accepts(tokenizer, auto.grammar, "Hello there.") and accepts(tokenizer, auto.grammar, two)
    assert not accepts(tokenizer, required.grammar, "Hello there.")
    assert not accepts(tokenizer, spec([WEATHER, PING], "required", parallel=False).grammar, two)
    named = spec([WEATHER, PING], {"type": "function", "function": {"name": "ping"}})
    assert named.callable == ["ping"] and not accepts(tokenizer, named.grammar, one)
    assert not accepts(tokenizer, required.grammar, one.replace('"Oslo"', "42"))  # arguments follow the parameters
    none = spec([WEATHER], "none")
    assert none.grammar is None and none.callable == [] and none.tools


@pytest.mark.parametrize("tools,choice,param,code", [
    ([{"type": "function", "function": {"name": "bad name"}}], None, "tools[0].function.name", "invalid_value"),
    ([{"type": "retrieval"}], None, "tools[0]", "invalid_value"),
    ([WEATHER, WEATHER], None, "tools[1].function.name", "invalid_value"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}], None, "tools[0].function.parameters", "invalid_schema"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "https://x.test/a"}}}}}],
     None, "tools[0].function.parameters", "invalid_schema"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "uniqueItems": True}}}], None,
     "tools[0].function.parameters", "unsupported_schema"),
    ([WEATHER], {"type": "function", "function": {"name": "nope"}}, "tool_choice", "invalid_value"),
    ([WEATHER], {"type": "function", "function": ["not", "a", "dict"]}, "tool_choice", "invalid_value"),
    (None, "required", "tool_choice", "invalid_value"),
])
def test_bad_definitions_are_400s_naming_the_field(tools, choice, param, code):
    with pytest.raises(InvalidRequestError) as err:
        spec(tools, choice)
    assert (err.value.status, err.value.param, err.value.code) == (400, param, code)


def test_tools_too_large_in_all_are_refused_naming_the_field():
    """A 3 MB `tools` field was accepted, prompted and logged; each tool alone may be small."""
    from router.gateway.errors import PayloadTooLargeError
    from router.gateway.structured import MAX_TOOLS_BYTES

    padded = [{"type": "function", "function": {"name": f"tool_{i}", "description": "x" * 4000}} for i in range(MAX_TOOLS_BYTES // 4000 + 1)]
    with pytest.raises(PayloadTooLargeError) as err:
        spec(padded[:128])
    assert (err.value.status, err.value.param, err.value.code) == (413, "tools", "tools_too_large")
    assert str(MAX_TOOLS_BYTES) in err.value.message
    spec(padded[:8])  # the same tools, fewer of them, are fine


def test_the_answers_skeleton_is_known_when_its_shape_is_fixed():
    from engines.skeleton import Slot
    from router.gateway.openai_api import ResponseFormat

    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    fmt = ResponseFormat(type="json_schema", json_schema={"name": "s", "schema": schema})
    assert spec(fmt=fmt).skeleton is not None and spec(fmt=fmt).schema == schema
    assert spec(fmt=ResponseFormat(type="json_object")).skeleton is None  # any object: no fixed shape
    named = spec([WEATHER, PING], {"type": "function", "function": {"name": "get_weather"}}).skeleton
    assert named[0].text.startswith('<tool_call>{"name": "get_weather"')
    several = spec([WEATHER, PING], "required").skeleton  # the name is an enum slot among the callable tools
    assert next(p for p in several if isinstance(p, Slot)).choices == (' "get_weather"', ' "ping"')
    auto = spec([WEATHER, PING], "auto")  # the model may answer in text: the skeleton only if it begins a call
    assert auto.skeleton == several and auto.skeleton_optional and not spec([WEATHER, PING], "required").skeleton_optional


def test_objects_are_closed_in_the_grammar_but_not_in_the_check(tokenizer):
    from router.gateway.openai_api import ResponseFormat

    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out = spec(fmt=ResponseFormat(type="json_schema", json_schema={"name": "s", "schema": schema}))
    assert accepts(tokenizer, out.grammar, '{"a": "x"}')
    assert not accepts(tokenizer, out.grammar, '{"a": "x", "b": 1}')  # a key the schema does not declare is never written
    assert out.content_check is not None  # the answer is still validated against the schema as given
