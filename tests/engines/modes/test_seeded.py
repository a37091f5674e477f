"""Skeleton-seeded block mode: the skeleton builder, slot layout and overflow, and answers that
validate in block mode on a random model that knows nothing of JSON (tests/conftest.py)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.types import GenerationRequest
from tests.engines.grammar.helpers import ASK, schema_spec, schemas, tools_spec

@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """A tiny random model like the session's, with a 256-token canvas: skeletons longer than the
    model's canvas go to AR, and these tests are about the ones that fit."""
    from engines import DiffusionEngine
    from lab.model.tiny import save_tiny_checkpoint

    return DiffusionEngine.from_checkpoint(save_tiny_checkpoint(tmp_path_factory.mktemp("tiny256") / "ckpt", seed=0, canvas_length=256))


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, seed=st.integers(0, 2**16))
def test_every_seeded_block_answer_validates(engine, schema, seed):
    spec = schema_spec(schema)
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, max_new_tokens=200,
                                          seed=seed, max_denoising_steps=2))
    assert r.mode == "block"
    jsonschema.validate(json.loads(r.text), schema)


def test_a_seeded_tool_call_names_the_tool_and_its_arguments_validate(engine):
    params = {"type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                               "unit": {"enum": ["c", "f"]}}, "required": ["location"]}
    spec = tools_spec([{"type": "function", "function": {"name": "get_weather", "parameters": params}},
                       {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}],
                      choice={"type": "function", "function": {"name": "get_weather"}})
    assert spec.skeleton is not None
    for seed in range(3):
        r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, max_new_tokens=96,
                                              seed=seed, max_denoising_steps=2))
        assert r.text.startswith('<tool_call>{"name": "get_weather", "arguments": {"location": "') and r.text.endswith("}</tool_call>")
        jsonschema.validate(json.loads(r.text[len('<tool_call>{"name": "get_weather", "arguments": '):-len("}</tool_call>")]), params)


def test_a_seeded_answer_costs_the_prefill_and_its_denoising_steps(engine):
    spec = schema_spec({"type": "object", "properties": {"level": {"enum": ["low", "high"]}, "ok": {"type": "boolean"}}})
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=3,
                                          max_denoising_steps=4))
    assert json.loads(r.text).keys() == {"level", "ok"}
    assert not r.stats.seeded_fallback and r.finish_reason == "stop"
    assert r.stats.forwards == 1 + sum(r.stats.steps_per_canvas) and len(r.stats.steps_per_canvas) == 1  # no commit pass, no AR


def test_a_slot_that_overflows_is_widened_and_the_answer_still_validates(engine):
    # The random model puts its end-of-value mass (filler and closing quotes) first: without the
    # closing quotes' share it fills a 2-token slot often, as a model writing a long value does.
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 1}, "level": {"enum": ["low", "high"]}}, "required": ["code"]}
    spec = schema_spec(schema)
    ends, engine.seeder.ends = engine.seeder.ends, torch.zeros_like(engine.seeder.ends)
    try:
        widened = None
        for seed in range(8):  # until the random model fills the 2-token slot: a second canvas for it alone
            r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=seed,
                                                  max_denoising_steps=2, max_new_tokens=48))
            jsonschema.validate(json.loads(r.text), schema)  # a widened value longer than maxLength is finished by AR
            if len(r.stats.steps_per_canvas) >= 2:
                widened = r
                break
    finally:
        engine.seeder.ends = ends
    assert widened is not None
    # the second canvas denoised the widened code slot only, within the request's 2 steps; the level slot stayed as committed
    assert 1 <= widened.stats.steps_per_canvas[1] <= 2


@pytest.mark.parametrize("mode", ["ar", "verified"])
def test_other_modes_ignore_the_skeleton_and_follow_the_grammar(engine, mode):
    spec = schema_spec({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    r = engine.generate(GenerationRequest(messages=ASK, mode=mode, grammar=spec.grammar, skeleton=spec.skeleton, seed=1, max_new_tokens=32,
                                          max_denoising_steps=2))
    assert isinstance(json.loads(r.text)["n"], int)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, seed=st.integers(0, 2**16))
def test_verified_with_a_seeded_first_draft_equals_constrained_ar(engine, schema, seed):
    spec = schema_spec(schema)
    ar, verified = (engine.generate(GenerationRequest(messages=ASK, mode=m, grammar=spec.grammar, skeleton=spec.skeleton, max_new_tokens=120,
                                                      seed=seed, max_denoising_steps=2)) for m in ("ar", "verified"))
    assert verified.token_ids == ar.token_ids
    assert verified.stats.steps_per_canvas  # it drafted


def test_an_optional_skeleton_is_seeded_only_when_the_model_begins_it(engine):
    # tool_choice auto: a call or a text answer. Whichever the model begins, the answer follows the grammar.
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    spec = tools_spec(tools, choice="auto")
    assert spec.skeleton_optional
    for seed in range(6):
        r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton,
                                              skeleton_optional=True, max_new_tokens=48, seed=seed, max_denoising_steps=2,
                                              temperature=1.0))
        if r.text.startswith("<tool_call>"):
            assert r.text.endswith("</tool_call>") and json.loads(r.text[len("<tool_call>"):-len("</tool_call>")])["name"] == "get_weather"
        else:
            assert not r.text.startswith("<") and r.stats.seeded_fallback  # a text answer, written by AR


def test_a_skeleton_longer_than_the_models_canvas_is_written_by_ar(engine):
    schema = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(60)}, "required": ["field_0"]}
    spec = schema_spec(schema)
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, max_new_tokens=300,
                                          seed=0))
    assert r.stats.seeded_fallback and r.stats.steps_per_canvas == []  # no canvas denoised
    jsonschema.validate(json.loads(r.text), schema)


def test_a_required_call_with_parallel_calls_allowed_ends_after_its_one_seeded_call(engine):
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    spec = tools_spec(tools, choice="required")  # the grammar allows up to 8 calls; the skeleton is one
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=0, max_denoising_steps=2))
    assert r.text == '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'
    assert not r.stats.seeded_fallback and r.finish_reason == "stop" and r.stats.forwards == 1 + sum(r.stats.steps_per_canvas)


def test_a_seeded_request_gets_the_same_tokens_alone_or_batched_with_other_schemas(engine):
    specs = [schema_spec({"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "integer"}}}),
             schema_spec({"type": "object", "properties": {"level": {"enum": ["low", "high"]}, "note": {"type": "string", "maxLength": 30}}}),
             tools_spec([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}}])]
    requests = lambda: [GenerationRequest(messages=ASK, mode="block", grammar=s.grammar, skeleton=s.skeleton, seed=7 + i, max_new_tokens=64,  # noqa: E731
                                          max_denoising_steps=3, temperature=1.0) for i, s in enumerate(specs)]
    alone = [engine.generate(r) for r in requests()]
    together = engine.generate_batch(requests())
    assert [r.token_ids for r in together] == [r.token_ids for r in alone]
