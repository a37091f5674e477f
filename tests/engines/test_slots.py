"""Slot decoding that spends little (issue 37): a seeded canvas's steps follow its slots, slots are
committed in confidence order, and constrained AR writes only the slots the grammar refuses."""

from __future__ import annotations

import json

import jsonschema
import pytest

from engines.skeleton import template_for_schema
from engines.skeleton_canvas import CanvasLayout
from engines.slot_ar import value_end
from engines.slot_schedule import OpenSlot, SlotSchedule, step_budget
from engines.types import GenerationRequest
from tests.engines.test_constrained import ASK, schema_spec


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from engines import DiffusionEngine
    from lab.model.tiny import save_tiny_checkpoint

    return DiffusionEngine.from_checkpoint(save_tiny_checkpoint(tmp_path_factory.mktemp("tiny-slots") / "ckpt", seed=0, canvas_length=256))


def open_slots(n: int) -> list[OpenSlot]:
    layout = CanvasLayout.build(template_for_schema({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(n)}}),
                                lambda text: list(text.encode()), 0)
    return [OpenSlot(span, 12 * i) for i, span in enumerate(layout.spans)]


def test_the_step_budget_follows_the_slot_positions_not_the_canvas():
    assert [step_budget(n, 12) for n in (1, 4, 12, 24, 36, 200)] == [1, 1, 2, 3, 5, 12]
    assert step_budget(36, 2) == 2  # never past the request's max_denoising_steps


def test_slots_commit_in_confidence_order_and_a_confident_slot_after_one_step():
    schedule = SlotSchedule([open_slots(3)], [36], max_steps=12, threshold=0.01)
    assert schedule.budget == [5]
    # one step in: slot 2 is confident, so it is read at once; none is due yet (floor(3 * 1/5) = 0)
    assert [s.span.slot.path for s in schedule.commit(0, [2.0, 1.0, 0.001])] == ["$.f2"]
    assert schedule.commit(0, [2.0, 1.5]) == [] and schedule.commit(0, [2.0, 1.5]) == []  # floor(3 * 3/5) = 1: already
    # step 4: floor(3 * 4/5) = 2 are due; the less uncertain goes first
    assert [s.span.slot.path for s in schedule.commit(0, [2.0, 1.5])] == ["$.f1"]
    assert [s.span.slot.path for s in schedule.commit(0, [3.0])] == ["$.f0"] and schedule.done(0) and schedule.steps == [5]


def test_where_a_value_ends():
    assert value_end("string", 'Sofia", "name') == 5
    assert value_end("string", 'say \\"hi\\"",') == 10  # escaped quotes are text
    assert value_end("number", "42}") == 2
    assert value_end("json", '["a, b", {"c": [1]}], "x"') == 20
    assert value_end("enum", ' "high"}') == 7
    assert value_end("string", "Sofi") is None and value_end("json", '[1, 2') is None


def test_a_random_models_canvas_takes_its_slot_budget(engine):
    spec = schema_spec({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]})
    r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=1, max_new_tokens=80))
    assert r.stats.steps_per_canvas[0] <= step_budget(24, 12) == 3  # 2 string slots of 12 positions, whatever the canvas around them
    assert r.stats.slot_tokens_block is not None and r.stats.slot_tokens_ar is not None


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


def test_a_committed_slot_is_laid_out_compact_and_the_rest_moves_with_it():
    from engines.slot_denoise import position_map

    template = template_for_schema({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}})
    encode = lambda text: list(text.encode())  # noqa: E731  one token per byte
    old = CanvasLayout.build(template, encode, 0, size=60)
    new = CanvasLayout.build(template, encode, 0, size=60, known={"$.a": encode("Sofia")})
    assert bytes(new.tokens[: new.spans[1].start]) == b'{"a": "Sofia", "b": "'  # the value in place, no filler after it
    assert new.spans[0].known and not new.spans[1].known and new.spans[1].capacity == old.spans[1].capacity
    where = position_map(old, new, 60)
    assert [where[new.spans[0].start + i] for i in range(5)] == list(range(old.spans[0].start, old.spans[0].start + 5))
    assert where[new.spans[1].start - len('", "b": "') : new.spans[1].end] == list(range(old.spans[0].end, old.spans[1].end))
    assert len(where) == 60 and max(where) < 60
