"""The fixed skeleton of a json_schema answer or a tool call (engines.skeleton): keys and punctuation
fixed, values left to slots, the template filled back to plain json.dumps, and a canvas laid out for
an answer read back to it."""

from __future__ import annotations

import json

from engines.skeleton import Fixed, Slot, fill, slot_values, template_for_schema, template_for_tool_call
from engines.modes.seeded_layout import CanvasLayout, layout_for_answer


NESTED = {
    "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string", "maxLength": 5}}}},
    "type": "object",
    "properties": {
        "invoice": {"type": "string", "description": "like ZK-88213"},
        "total": {"type": "number"},
        "items": {"type": "integer"},
        "status": {"enum": ["paid", "open"]},
        "urgent": {"type": "boolean"},
        "ship_to": {"$ref": "#/$defs/Address"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"const": "invoice"},
        "note": {"type": ["string", "null"]},
    },
    "required": ["invoice", "total"],  # the rest optional: the skeleton writes them all the same
}
ANSWER = {"invoice": "ZK-88213", "total": 41.5, "items": 3, "status": "open", "urgent": False,
          "ship_to": {"street": "42 Marlow Lane", "zip": "90210"}, "tags": ["a", "b"], "kind": "invoice", "note": None}


def encode_with(engine):
    return lambda text: engine.tokenizer.encode(text, add_special_tokens=False)


def test_the_skeleton_fixes_keys_and_punctuation_and_leaves_values_to_slots():
    template = template_for_schema(NESTED)
    kinds = {p.path: p.kind for p in template if isinstance(p, Slot)}
    assert kinds == {"$.invoice": "string", "$.total": "number", "$.items": "integer", "$.status": "enum", "$.urgent": "enum",
                     "$.ship_to.street": "string", "$.ship_to.zip": "string", "$.tags": "json", "$.note": "json"}
    fixed = "".join(p.text for p in template if isinstance(p, Fixed))
    assert '"kind": "invoice"' in fixed and '"ship_to": {"street": "' in fixed  # const and nested object ($ref followed) are skeleton
    status = next(p for p in template if isinstance(p, Slot) and p.path == "$.status")
    assert status.choices == (' "paid"', ' "open"')
    zip_slot = next(p for p in template if isinstance(p, Slot) and p.path == "$.ship_to.zip")
    assert zip_slot.capacity == 6  # maxLength 5 and the filler
    assert fill(template, slot_values(template, ANSWER)) == json.dumps(ANSWER)  # the skeleton writes plain json.dumps


def test_a_tool_call_skeleton_is_the_chat_templates_call():
    params = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
    template = template_for_tool_call("get_weather", params)
    args = {"city": "Oslo", "days": 3}
    assert fill(template, slot_values(template, args)) == '<tool_call>{"name": "get_weather", "arguments": ' + json.dumps(args) + "}</tool_call>"
    assert template_for_tool_call("ping", {"type": "object", "properties": {}}) == (Fixed('<tool_call>{"name": "ping", "arguments": {}}</tool_call>'),)


def test_a_filled_canvas_reads_back_to_the_answer_and_an_overfull_slot_is_reported(engine):
    encode, eos = encode_with(engine), min(engine.eos_ids)
    template = template_for_schema(NESTED)
    layout, canvas = layout_for_answer(template, ANSWER, encode, eos)
    answer, overflowed = layout.read(canvas)
    assert engine.tokenizer.decode(answer) == json.dumps(ANSWER) and overflowed == []
    assert all(layout.fixed[i] for i in range(len(canvas)) if not any(s.start <= i < s.end for s in layout.spans))
    # a value as long as its slot leaves no filler: it may have been cut, so the slot is reported
    tight = CanvasLayout.build(template, encode, eos)
    invoice = next(s for s in tight.spans if s.slot.path == "$.invoice")
    full = list(tight.tokens)
    full[invoice.start : invoice.end] = encode("x" * invoice.capacity)[: invoice.capacity]
    assert tight.read(full)[1] == ["$.invoice"]
    # training lays a long value out as serving's widened attempt would
    long_answer = ANSWER | {"invoice": "INV-2093-A-77812-BX-4410"}
    wide, _ = layout_for_answer(template, long_answer, encode, eos)
    assert next(s for s in wide.spans if s.slot.path == "$.invoice").capacity > invoice.capacity
