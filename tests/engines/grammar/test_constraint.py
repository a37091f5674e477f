"""Decoding under a grammar: every answer parses and validates, in AR and verified mode, on a
random model that has no idea what JSON is; verified equals AR under greedy decoding."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.errors import InvalidRequestError
from engines.types import GenerationRequest
from router.gateway.tool_calls import read_answer
from tests.engines.grammar.helpers import ASK, schema_spec, schemas, tools_spec

@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas, mode=st.sampled_from(["ar", "verified"]), seed=st.integers(0, 2**16))
def test_every_json_schema_answer_validates(engine, schema, mode, seed):
    spec = schema_spec(schema)
    # The test tokenizer has 320 tokens, about one character each: 160 leave room for the closing
    # window (engines.grammar.constraint) to end even a deep schema's required keys.
    # Verified drafts with one denoising step: its output never depends on the drafts, only its cost.
    r = engine.generate(GenerationRequest(messages=ASK, mode=mode, grammar=spec.grammar, max_new_tokens=160, temperature=1.0, seed=seed,
                                          max_denoising_steps=1))
    jsonschema.validate(json.loads(r.text), schema)  # finished or closed early: valid either way


def test_verified_equals_ar_under_a_grammar(engine):
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
              "required": ["a", "b"]}
    spec = schema_spec(schema)
    ar, verified = (engine.generate(GenerationRequest(messages=ASK, mode=m, grammar=spec.grammar, max_new_tokens=48, seed=1,
                                                      max_denoising_steps=4)) for m in ("ar", "verified"))
    assert verified.token_ids == ar.token_ids and verified.text == ar.text


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["location"]}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.mark.parametrize("mode", ["ar", "verified"])
def test_every_tool_call_has_arguments_that_validate(engine, mode):
    spec = tools_spec(TOOLS)
    for seed in range(4):
        r = engine.generate(GenerationRequest(messages=ASK, mode=mode, grammar=spec.grammar, max_new_tokens=64, temperature=1.0, seed=seed,
                                              max_denoising_steps=1))
        content, calls = read_answer(r.text, True)
        assert content is None and calls, r.text
        for call in calls:
            tool = next(t for t in TOOLS if t["function"]["name"] == call.name)
            jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])


def test_block_mode_refuses_a_grammar(engine):
    with pytest.raises(InvalidRequestError, match="only with a skeleton"):
        engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=schema_spec({"type": "object"}).grammar))


def test_a_grammar_the_library_cannot_use_is_a_400(engine):
    with pytest.raises(InvalidRequestError, match="grammar cannot be used"):
        engine.generate(GenerationRequest(messages=ASK, mode="ar", grammar='{"grammars": [{"lark_grammar": "start: ("}]}'))


@pytest.mark.parametrize("vocab", [2048, 2050, 262_144])
def test_the_eager_bitmask_masks_what_llguidance_masks(vocab):
    """engines.grammar.constraint.apply_bitmask_ (eager: no C++ build at engine start) against llguidance's
    own NumPy kernel, on random masks; a vocabulary past the mask's words is masked too."""
    import llguidance.numpy
    import numpy as np
    import torch

    from engines.grammar.constraint import apply_bitmask_

    g = torch.Generator().manual_seed(vocab)
    for _ in range(3):
        mask = torch.randint(-2**31, 2**31 - 1, (2, (vocab + 31) // 32), dtype=torch.int32, generator=g)
        logits = torch.randn(2, vocab, generator=g)
        expected = logits.numpy().copy()
        llguidance.numpy.apply_token_bitmask_inplace(expected, mask.numpy())
        apply_bitmask_(logits, mask)
        assert np.array_equal(logits.numpy(), expected)
    wider = torch.zeros(1, 2048 + 40)
    apply_bitmask_(wider, torch.full((1, 64), -1, dtype=torch.int32))
    assert torch.isinf(wider[0, 2048:]).all() and not torch.isinf(wider[0, :2048]).any()


# ---- tool_choice auto: a call the budget or the grammar rules out is a 400, never a silent empty answer ----

EMAIL = {"type": "function", "function": {"name": "send_mail", "parameters": {
    "type": "object", "properties": {"to": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"}}, "required": ["to"]}}}


def auto_request(tools: list[dict], max_new_tokens: int, **kwargs) -> GenerationRequest:
    spec = tools_spec(tools, "auto")
    return GenerationRequest(messages=ASK, mode="ar", grammar=spec.grammar, constrained_opener=spec.constrained_opener,
                             max_new_tokens=max_new_tokens, **kwargs)


def test_auto_with_max_tokens_under_the_shortest_call_is_a_400_naming_the_minimum(engine):
    required = tools_spec(TOOLS[:1], "required")
    with pytest.raises(InvalidRequestError) as under_required:  # the shortest call, as a required call states it
        engine.generate(GenerationRequest(messages=ASK, mode="ar", grammar=required.grammar, max_new_tokens=8))
    shortest = int(re.search(r"the (\d+) tokens", under_required.value.message).group(1))
    with pytest.raises(InvalidRequestError, match=rf"max_tokens {shortest - 1} is below the {shortest} tokens the shortest tool call") as exc:
        engine.generate(auto_request(TOOLS[:1], shortest - 1))
    assert (exc.value.param, exc.value.code) == ("max_tokens", "max_tokens_too_small")
    engine.generate(auto_request(TOOLS[:1], shortest))  # the minimum it names is served


def test_auto_with_a_call_the_closer_cannot_end_is_a_400_naming_the_tools(engine):
    with pytest.raises(InvalidRequestError, match="no tool call could be made|no way to end") as exc:
        engine.generate(auto_request([EMAIL], 256))
    assert exc.value.param == "tools"


def test_an_auto_answer_is_never_empty(engine):
    """The grammar under tool_choice auto does not accept the empty answer (the end of sequence first),
    so a tools request is answered with a call or with text, never an empty 'stop'."""
    spec = tools_spec(TOOLS, "auto")
    assert not engine.grammar_tokenizer.constraint(spec.grammar, 64, spec.constrained_opener).accepting
    for seed in range(3):
        r = engine.generate(auto_request(TOOLS, 64, temperature=1.0, seed=seed))
        content, calls = read_answer(r.text, True)
        assert r.token_ids and (calls or content), r.text
