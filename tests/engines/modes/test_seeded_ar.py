"""Constrained AR for the slots the grammar refuses (engines.modes.seeded_ar, issue 37): where a value ends,
and AR writes only the slot a random model's canvas cannot, the rest of the answer coming from the canvas."""

from __future__ import annotations

import json

import jsonschema
import pytest

from engines.modes.seeded_ar import value_end
from engines.types import GenerationRequest
from tests.engines.grammar.helpers import ASK, schema_spec


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from engines import DiffusionEngine
    from lab.model.tiny import save_tiny_checkpoint

    return DiffusionEngine.from_checkpoint(save_tiny_checkpoint(tmp_path_factory.mktemp("tiny-slots") / "ckpt", seed=0, canvas_length=256))


def test_where_a_value_ends():
    assert value_end("string", 'Sofia", "name') == 5
    assert value_end("string", 'say \\"hi\\"",') == 10  # escaped quotes are text
    assert value_end("number", "42}") == 2
    assert value_end("json", '["a, b", {"c": [1]}], "x"') == 20
    assert value_end("enum", ' "high"}') == 7
    assert value_end("string", "Sofi") is None and value_end("json", '[1, 2') is None


@pytest.mark.parametrize("seed", range(3))
def test_ar_writes_only_the_slot_the_grammar_refuses(engine, seed):
    # a random model's canvas never writes three digits: AR writes the code; the skeleton after it and
    # the note's value come from the canvas
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[0-9]{3}$"}, "note": {"type": "string"}},
              "required": ["code", "note"]}
    spec = schema_spec(schema)
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=seed,
                                          max_new_tokens=80, max_denoising_steps=4))
    answer = json.loads(r.text)
    jsonschema.validate(answer, schema)
    s = r.stats
    assert s.seeded_fallback and s.slot_tokens_ar >= 1
    # AR's calls: its prefill, then one per token it wrote but the last
    assert s.encoder_calls == 2 + s.slot_tokens_ar - 1
    tail = engine.tokenizer.encode(r.text[len('{"code": "'):], add_special_tokens=False)
    assert s.slot_tokens_ar < len(tail)  # not the rest of the answer: the note came from the canvas
    assert s.slot_tokens_block == len(engine.tokenizer.encode(answer["note"], add_special_tokens=False)) or answer["note"] == ""
