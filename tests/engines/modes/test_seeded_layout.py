"""A skeleton on a canvas (engines/modes/seeded_layout.py): where the fixed tokens and the slots sit,
how a denoised canvas reads back, and the training canvas of an answer. Bytes stand in for tokens
(filler 0), so every position is known by hand."""

from __future__ import annotations

from engines.skeleton import MAX_CAPACITY, fill, slot_values, template_for_schema
from engines.modes.seeded_layout import CanvasLayout, layout_for_answer

FILLER = 0
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "ok": {"type": "boolean"}}}
TEMPLATE = template_for_schema(SCHEMA)


def encode(text: str) -> list[int]:
    return list(text.encode())


def test_the_skeleton_is_fixed_and_each_slot_is_filler_to_denoise():
    layout = CanvasLayout.build(TEMPLATE, encode, FILLER)
    name, ok = layout.spans
    assert bytes(layout.tokens[: name.start]) == b'{"name": "'
    assert name.capacity == 6 and not any(layout.fixed[name.start : name.end])  # maxLength 5 + its filler
    assert layout.tokens[name.start : name.end] == [FILLER] * 6
    assert ok.capacity == len(encode(" false")) + 1  # an enum: its longest choice and a filler
    assert layout.length == len(layout.tokens) and layout.tokens[-1] == FILLER and layout.fixed[-1]  # the answer's end


def test_a_denoised_canvas_reads_back_to_the_answer_and_reports_a_slot_it_filled():
    layout = CanvasLayout.build(TEMPLATE, encode, FILLER)
    name, ok = layout.spans
    canvas = list(layout.tokens)
    canvas[name.start : name.start + 3] = encode("Ann")
    canvas[ok.start : ok.start + 5] = encode(" true")
    ids, overflowed = layout.read(canvas)
    assert bytes(ids).decode() == '{"name": "Ann", "ok": true}' and overflowed == []
    canvas[name.start : name.end] = encode("Annabe")  # no filler left in the slot: the value may be cut
    assert layout.read(canvas)[1] == ["$.name"]


def test_known_slots_are_laid_out_fixed_and_the_canvas_is_padded_to_its_size():
    layout = CanvasLayout.build(TEMPLATE, encode, FILLER, known={"$.name": encode("Bo") + [FILLER]}, size=64)
    name = layout.spans[0]
    assert name.known and name.capacity == 3 and all(layout.fixed[name.start : name.end])
    assert len(layout.tokens) == 64 and all(layout.fixed[layout.length :])


def test_a_training_canvas_widens_a_slot_as_serving_would_and_reads_back_to_the_answer():
    template = template_for_schema({"type": "object", "properties": {"note": {"type": "string"}}})
    answer = {"note": "a value of twenty-two"}  # 21 bytes: past the default 12, fits once doubled to 24
    layout, canvas = layout_for_answer(template, answer, encode, FILLER)
    assert layout.spans[0].capacity == 24
    assert bytes(layout.read(canvas)[0]).decode() == fill(template, slot_values(template, answer))
    assert layout_for_answer(template, {"note": "x" * MAX_CAPACITY}, encode, FILLER) is None  # no slot holds it
    assert layout_for_answer(template, answer, encode, FILLER, size=20) is None  # nor a canvas that small
