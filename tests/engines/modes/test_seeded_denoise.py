"""The seeded canvas's denoising (engines.modes.seeded_denoise, issue 37): a canvas reads at least a token of
each open slot a step and stops at the request's step limit; a committed slot is laid out compact
with the rest moved along."""

from __future__ import annotations

import pytest

from engines.skeleton import template_for_schema
from engines.modes.seeded_layout import CanvasLayout
from engines.types import GenerationRequest
from tests.engines.grammar.helpers import ASK, schema_spec


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from engines import DiffusionEngine
    from lab.model.tiny import save_tiny_checkpoint

    return DiffusionEngine.from_checkpoint(save_tiny_checkpoint(tmp_path_factory.mktemp("tiny-slots") / "ckpt", seed=0, canvas_length=256))


def test_a_canvas_reads_a_token_of_each_slot_a_step_and_stops_at_the_request_limit(engine):
    spec = schema_spec({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]})

    def first_canvas_steps(limit: int) -> int:
        r = engine.generate(GenerationRequest(messages=ASK, mode="block", grammar=spec.grammar, skeleton=spec.skeleton, seed=1,
                                              max_new_tokens=80, max_denoising_steps=limit))
        assert r.stats.slot_tokens_block is not None and r.stats.slot_tokens_ar is not None
        return r.stats.steps_per_canvas[0]

    assert first_canvas_steps(64) <= 12  # 2 string slots of 12 positions, whatever the canvas around them
    assert first_canvas_steps(3) <= 3


def test_a_committed_slot_is_laid_out_compact_and_the_rest_moves_with_it():
    from engines.modes.seeded_denoise import position_map

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
