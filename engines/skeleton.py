"""Schema-aware canvases: the fixed skeleton of a structured answer and the value slots left to denoise.

A JSON schema (or a tool call) fixes most of its answer: braces, keys, quotes, separators, the tool
name. `template_for_schema` writes that answer as a `Template`: `Fixed` text and typed `Slot`s for
the values. `engines.modes.seeded_layout.CanvasLayout` lays a template out on one canvas: the skeleton's
tokens at fixed positions and `capacity` positions per slot. Block mode denoises only the slot
positions; a slot writes its value and then fills the rest with the filler token (EOS, the token the
model already writes after an answer). Reading a slot back takes its tokens up to the first filler.

Slot capacity comes from the schema: an enum's longest choice, `maxLength`, a string's `format`
(a date is 10 digits and dashes), or a per-type default. A value that fills its whole slot may have
been cut (`overflowed`): the canvas is denoised again with that slot twice as wide, up to
`MAX_CAPACITY`; a value longer still, or a canvas the grammar refuses, is finished by constrained
AR from its longest valid prefix, so the answer always parses.

The JSON is written as `json.dumps` writes it (", " and ": "), the style of the task suite and of
the chat template's tool calls. Every property of an object is written, required or not (a schema
is satisfied by an answer with its optional fields present). Text with no fixed shape (arrays,
`anyOf`, free objects) becomes a `json` slot: any JSON, checked by the grammar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

# How a JSON schema reaches the model: a system turn the gateway adds to a json_schema request
# and the task suite writes into its structured items, so both see the same words.
SCHEMA_INSTRUCTION = "Answer with JSON that follows this schema: "

SlotKind = Literal["string", "integer", "number", "enum", "json"]
# Default capacity (tokens) per slot kind. The shipped tokenizer splits digits one by one.
CAPACITY = {"string": 12, "integer": 8, "number": 10, "json": 24}
FORMAT_CAPACITY = {"date": 12, "date-time": 24, "time": 10, "email": 16, "uri": 24, "uuid": 40}
MAX_CAPACITY = 64  # a slot never grows past this; longer values are finished by constrained AR
MAX_DEPTH = 8  # nesting a skeleton follows; deeper parts become json slots


# Separators the chat template's `tojson` and `json.dumps` write, given to llguidance's JSON grammar
# so that constrained answers, skeletons and history all look alike.
JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames")


def closed_objects(schema):
    """`schema` with `additionalProperties: false` on every object that declares properties and says
    nothing about others: what the grammar decodes under (as xgrammar's strict mode does). Any answer
    it allows is valid under `schema`; a small model is not invited to invent keys."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed_objects(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed_objects(sub) for sub in out[key]]
    for key in _SCHEMA_ONE:
        if key in out:
            out[key] = closed_objects(out[key])
    if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema and "patternProperties" not in schema:
        out["additionalProperties"] = False
    return out


def json_schema_grammar(schema: dict) -> str:
    """The llguidance grammar (serialized) of an answer under `schema`, in JSON_STYLE, objects closed."""
    return json.dumps({"grammars": [{"json_schema": closed_objects(schema) | {"x-guidance": JSON_STYLE}}]})


def schema_instruction(schema: dict) -> str:
    """The system turn's text for a response schema (compact JSON, keys in their order)."""
    return SCHEMA_INSTRUCTION + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Fixed:
    text: str


@dataclass(frozen=True)
class Slot:
    kind: SlotKind
    capacity: int  # tokens, filler included
    path: str  # where the value sits, e.g. "$.customer.email" (for tests and traces)
    choices: tuple[str, ...] = ()  # enum: each choice as JSON text ('"high"', '3', 'true')


Part = Fixed | Slot
Template = tuple[Part, ...]


def _merge(parts: list[Part]) -> Template:
    """Adjacent fixed texts joined, empty ones dropped."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, Fixed):
            if not p.text:
                continue
            if out and isinstance(out[-1], Fixed):
                out[-1] = Fixed(out[-1].text + p.text)
                continue
        out.append(p)
    return tuple(out)


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    return [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []


def _resolve(schema, root: dict, depth: int):
    """`schema` with a local `$ref` ("#/$defs/Name", as pydantic writes nested models) followed."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/") and depth <= MAX_DEPTH:
        node = root
        for key in schema["$ref"][2:].split("/"):
            node = node.get(key) if isinstance(node, dict) else None
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema, depth = ({**node, **extra} if isinstance(node, dict) else None), depth + 1
    return schema


def _value(schema: dict, path: str, depth: int, lead: str = "", root: dict | None = None) -> list[Part]:
    """The parts of one value under `schema`. `lead` is the space after a key's colon: it goes with
    the value's first piece, where the tokenizer puts it (' "', ' 3'), so the skeleton's tokens are
    the ones the model reads and writes in plain JSON."""
    json_slot = [Fixed(lead), Slot("json", CAPACITY["json"], path)]
    root = schema if root is None else root
    schema = _resolve(schema, root, depth)
    if not isinstance(schema, dict):
        return json_slot
    if "const" in schema:
        return [Fixed(lead + json.dumps(schema["const"], ensure_ascii=False))]
    if "enum" in schema:
        choices = tuple(lead + json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        return [Fixed(choices[0])] if len(choices) == 1 else [Slot("enum", 0, path, choices)]
    types = _types(schema)
    if len(types) != 1 or depth > MAX_DEPTH:
        return json_slot
    kind = types[0]
    if kind == "object" and schema.get("properties") == {}:
        return [Fixed(lead + "{}")]  # no declared property: the empty object is always valid
    if kind == "object" and isinstance(schema.get("properties"), dict):
        parts: list[Part] = [Fixed(lead + "{")]
        for i, (key, sub) in enumerate(schema["properties"].items()):
            parts.append(Fixed((", " if i else "") + json.dumps(key, ensure_ascii=False) + ":"))
            parts += _value(sub, f"{path}.{key}", depth + 1, " ", root)
        return parts + [Fixed("}")]
    if kind == "string":
        fmt = schema.get("format")
        capacity = FORMAT_CAPACITY.get(fmt, CAPACITY["string"])
        if isinstance(schema.get("maxLength"), int):
            capacity = max(2, min(MAX_CAPACITY, schema["maxLength"] + 1))
        return [Fixed(lead + '"'), Slot("string", capacity, path), Fixed('"')]
    if kind in ("integer", "number"):
        return [Fixed(lead), Slot(kind, CAPACITY[kind], path)]
    if kind == "boolean":
        return [Slot("enum", 0, path, (lead + "true", lead + "false"))]
    if kind == "null":
        return [Fixed(lead + "null")]
    return json_slot  # arrays, free objects


def template_for_schema(schema: dict) -> Template:
    """The skeleton of an answer under `schema` (a JSON Schema, refs already resolved)."""
    return _merge(_value(schema, "$", 0))


def template_for_tool_call(name: str, parameters: dict) -> Template:
    """The skeleton of one call, as the chat template writes it: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`."""
    head = Fixed('<tool_call>{"name": ' + json.dumps(name) + ', "arguments":')
    return _merge([head, *_value(parameters, "$", 0, " "), Fixed("}</tool_call>")])


def template_for_tool_choice(tools: list[tuple[str, dict]]) -> Template:
    """The skeleton of one call to one of `tools` ([(name, parameters)]): the whole call for one
    tool; for several, the name is an enum slot and the arguments a json slot (the grammar holds
    them to the chosen tool's parameters)."""
    if len(tools) == 1:
        return template_for_tool_call(*tools[0])
    names = tuple(" " + json.dumps(name) for name, _ in tools)
    return (Fixed('<tool_call>{"name":'), Slot("enum", 0, "$.name", names), Fixed(', "arguments": '),
            Slot("json", 2 * CAPACITY["json"], "$.arguments"), Fixed("}</tool_call>"))


def slots(template: Template) -> list[Slot]:
    return [p for p in template if isinstance(p, Slot)]


def fill(template: Template, values: dict[str, str]) -> str:
    """The answer text with each slot's value (JSON text for enum/number/json, raw text inside a
    string's quotes), by slot path: the inverse of reading a filled canvas back."""
    return "".join(p.text if isinstance(p, Fixed) else values[p.path] for p in template)


def slot_values(template: Template, obj) -> dict[str, str]:
    """Each slot's text in the answer `obj` (a parsed JSON value under the template's schema):
    what a training canvas puts in the slots."""
    out: dict[str, str] = {}
    for slot in slots(template):
        value = obj
        for key in slot.path.split(".")[1:]:
            value = value[key]
        text = json.dumps(value, ensure_ascii=False)
        if slot.kind == "string":
            out[slot.path] = text[1:-1]  # escaped, without its quotes
        elif slot.kind == "enum":
            out[slot.path] = next(c for c in slot.choices if c.strip() == text)  # with its lead space
        else:
            out[slot.path] = text
    return out
