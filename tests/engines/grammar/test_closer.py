"""The closer (engines.grammar.closer) and the rule it serves: an answer under a grammar ends valid within
max_tokens, or the request is a 400 before any decoding.

On a random tiny model that has no idea what JSON is, over generated schemas and tools (patterns,
formats, minimum lengths, nested objects, arrays) and every max_tokens from 1 to 256, in AR,
verified and block mode: a request either is refused while its row is built (before the decode
loop runs), naming a minimum that a request with that budget then meets, or decodes to an answer
that validates, in at most max_tokens tokens."""

from __future__ import annotations

import json
import re

import jsonschema
import llguidance
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engines.grammar.closer import after_text
from engines.grammar.constraint import LIMITS
from engines.errors import InvalidRequestError
from engines.skeleton import json_schema_grammar
from engines.types import GenerationRequest
from router.gateway.tool_calls import read_answer
from tests.engines.grammar.helpers import ASK, schema_spec, tools_spec
from tests.engines.grammar.closer_cases import choices, schemas, tools


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """A tiny random model with a 256-token canvas, so block mode seeds the skeletons generated here."""
    from engines import DiffusionEngine
    from lab.model.tiny import save_tiny_checkpoint

    return DiffusionEngine.from_checkpoint(save_tiny_checkpoint(tmp_path_factory.mktemp("tiny256") / "ckpt", seed=0, canvas_length=256))


def closing(engine, schema: dict, prefix: str = "") -> tuple[str, int]:
    """The closer's way to end an answer under `schema` after `prefix`: (the whole text, its tokens after the prefix)."""
    matcher = llguidance.LLMatcher(engine.grammar_tokenizer.tokenizer, json_schema_grammar(schema), log_level=0, limits=LIMITS)
    ids = engine.tokenizer.encode(prefix, add_special_tokens=False)
    assert matcher.consume_tokens(ids), matcher.get_error()
    path, why = engine.grammar_tokenizer.closer.path(matcher, after_text((False, False), prefix), 4096)
    assert path is not None, why
    return prefix + engine.tokenizer.decode(path), len(path)


def one(prop: dict) -> dict:
    return {"type": "object", "properties": {"v": prop}, "required": ["v"]}


@pytest.mark.parametrize("prop", [
    {"type": "string", "pattern": "(a+)+$"},  # a quote cannot end it: the string must end with an 'a'
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "date"},
    {"type": "string", "minLength": 7},
    {"type": "number", "minimum": 0.0001, "maximum": 0.0002},  # 0.000... never ends by itself: the search finds the 1
    {"type": "integer", "minimum": 1000},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
    {"anyOf": [{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, {"type": "null"}]},
])
@pytest.mark.parametrize("prefix", ["", '{"v": '])
def test_the_closer_ends_any_value_the_grammar_allows(engine, prop, prefix):
    schema = one(prop)
    jsonschema.validate(json.loads(closing(engine, schema, prefix)[0]), schema)


@pytest.mark.parametrize(("prop", "prefix"), [
    ({"type": "string", "pattern": "(a+)+$"}, '{"v": "xyz'), ({"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}, '{"v": "AB'),
    ({"type": "string", "format": "email"}, '{"v": "bob'), ({"type": "string", "format": "date"}, '{"v": "2024-0'),
    ({"type": "string", "minLength": 7}, '{"v": "ab'), ({"type": "number", "minimum": 0.0001, "maximum": 0.0002}, '{"v": 0.000'),
])
def test_the_closer_ends_a_value_the_model_began(engine, prop, prefix):
    jsonschema.validate(json.loads(closing(engine, one(prop), prefix)[0]), one(prop))


def test_the_closer_finds_a_tools_name_and_ends_its_arguments(engine):
    spec = tools_spec([{"type": "function", "function": {"name": "search_flights", "parameters": one({"type": "string", "pattern": "^[A-Z]{3}$"})}},
                       {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}])
    matcher = llguidance.LLMatcher(engine.grammar_tokenizer.tokenizer, spec.grammar, log_level=0, limits=LIMITS)
    path, _ = engine.grammar_tokenizer.closer.path(matcher, (False, False), 4096)
    content, calls = read_answer(engine.tokenizer.decode(path), True)
    assert content is None and [c.name for c in calls] in (["ping"], ["search_flights"])


@pytest.mark.parametrize("schema", [{"$ref": "#"}, {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
                                    one({"$ref": "#/$defs/n"}) | {"$defs": {"n": one({"$ref": "#/$defs/n"})}}])
def test_a_schema_without_an_answer_is_refused_before_decoding(engine, schema):
    with pytest.raises(InvalidRequestError) as err:
        engine.row(GenerationRequest(messages=ASK, mode="ar", grammar=json_schema_grammar(schema)), [1, 2, 3])
    assert err.value.status == 400 and err.value.code == "unsatisfiable_schema"


def test_max_tokens_below_the_shortest_answer_is_a_400_naming_both(engine):
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in ("origin", "destination", "date", "airline")},
              "required": ["origin", "destination", "date", "airline"]}
    shortest = closing(engine, schema)[1]
    with pytest.raises(InvalidRequestError) as err:
        engine.generate(GenerationRequest(messages=ASK, mode="ar", grammar=json_schema_grammar(schema), max_new_tokens=shortest - 1))
    assert err.value.code == "max_tokens_too_small" and err.value.param == "max_tokens"
    assert f"max_tokens {shortest - 1} " in err.value.message and f"{shortest} tokens" in err.value.message
    r = engine.generate(GenerationRequest(messages=ASK, mode="ar", grammar=json_schema_grammar(schema), max_new_tokens=shortest,
                                          temperature=1.0, seed=3))
    assert r.finish_reason == "stop" and r.stats.closed_early and len(r.token_ids) <= shortest
    jsonschema.validate(json.loads(r.text), schema)


# ---- the property: valid within max_tokens, or a 400 before decoding --------------------------------------

def valid(text: str, tools_: list | None, schema: dict | None, choice: str | None) -> None:
    """`text` is a valid answer: JSON under `schema`, or calls (with valid arguments) to `tools_`."""
    if schema is not None:
        jsonschema.validate(json.loads(text), schema)
        return
    content, calls = read_answer(text, True)
    if choice == "auto" and content is not None:
        assert not content.startswith("<")  # a text answer
        return
    assert content is None and calls, text
    for call in calls:
        tool = next(t for t in tools_ if t["function"]["name"] == call.name)
        jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])


def spec_for(tools_, schema, choice):
    if schema is not None:
        return schema_spec(schema)
    named = {"type": "function", "function": {"name": tools_[0]["function"]["name"]}}
    return tools_spec(tools_, named if choice == "named" else choice)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), mode=st.sampled_from(["ar", "verified", "block"]), max_tokens=st.integers(1, 256), temperature=st.sampled_from([0.0, 1.0]),
       sample_seed=st.integers(0, 2**16))
@pytest.mark.slow
def test_every_answer_validates_within_max_tokens_or_is_refused_before_decoding(engine, data, mode, max_tokens, temperature, sample_seed):
    kind = data.draw(st.sampled_from(["schema", "tools"]))
    schema = data.draw(schemas) if kind == "schema" else None
    tools_, choice = (data.draw(tools), data.draw(choices)) if kind == "tools" else (None, None)
    spec = spec_for(tools_, schema, choice)

    def request(budget: int) -> GenerationRequest:
        return GenerationRequest(messages=ASK, tools=[t.template() for t in spec.tools] or None, mode=mode, grammar=spec.grammar,
                                 constrained_opener=spec.constrained_opener, skeleton=spec.skeleton, skeleton_optional=spec.skeleton_optional, max_new_tokens=budget,
                                 temperature=temperature, seed=sample_seed, max_denoising_steps=2)

    req = request(max_tokens)
    ids, params = engine.validate(req)
    try:
        row = engine.row(req, ids)  # the grammar, its closer and the budget are checked here, before any model call
    except InvalidRequestError as exc:
        event(f"refused: {exc.code}")
        assert exc.status == 400 and exc.code in ("max_tokens_too_small", "unsupported_schema"), exc
        if exc.code == "max_tokens_too_small":  # the minimum it names is honest: a request with that budget is served
            minimum = int(re.search(r"ask for at least (\d+)", exc.message).group(1))
            assert minimum > max_tokens
            r = engine.generate(request(minimum))
            assert len(r.token_ids) <= minimum
            valid(r.text, tools_, schema, choice)
        return
    engine._decode([row], [params])
    r = row.result()
    event(f"served ({mode}, closed early: {r.stats.closed_early})")
    assert len(r.token_ids) <= max_tokens and r.finish_reason == "stop", (r.finish_reason, r.text)
    valid(r.text, tools_, schema, choice)


def test_a_request_degraded_to_ar_keeps_the_promise(engine):
    """A failover re-sends the request with only its mode replaced (router.gateway.failover): the AR
    engine builds the same grammar, checks the same budget and keeps the same room to end."""
    from dataclasses import replace

    tools_ = [{"type": "function", "function": {"name": "search_flights", "parameters": {
        "type": "object", "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}, "passengers": {"type": "integer"}},
        "required": ["origin", "destination", "passengers"]}}}]
    spec = tools_spec(tools_)
    block = GenerationRequest(messages=ASK, tools=[t.template() for t in spec.tools], mode="block", grammar=spec.grammar, skeleton=spec.skeleton,
                              max_new_tokens=256, temperature=1.0)
    with pytest.raises(InvalidRequestError, match="ask for at least") as err:
        engine.generate(replace(block, mode="ar", max_new_tokens=8))
    budget = int(re.search(r"at least (\d+)", err.value.message).group(1)) + 4  # the shortest call and a few tokens to spare
    for s in range(4):
        r = engine.generate(replace(block, mode="ar", seed=s, max_new_tokens=budget))
        assert r.finish_reason == "stop" and len(r.token_ids) <= budget
        valid(r.text, tools_, None, "required")
