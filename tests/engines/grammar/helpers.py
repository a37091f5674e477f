"""What tests of decoding under a grammar share (tests/engines/grammar, tests/engines/modes,
tests/engines/batch): the request's messages, output specs for a schema or tools as the gateway builds
them, and Hypothesis strategies of small answerable JSON schemas."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import strategies as st

from router.gateway.openai_api import ResponseFormat
from router.gateway.structured import output_spec

ASK = [{"role": "user", "content": "Extract the fields."}]


def schema_spec(schema: dict):
    fmt = ResponseFormat(type="json_schema", json_schema={"name": "s", "schema": schema})
    return output_spec(SimpleNamespace(tools=None, tool_choice=None, parallel_tool_calls=None, response_format=fmt))


def tools_spec(tools: list[dict], choice="required"):
    return output_spec(SimpleNamespace(tools=tools, tool_choice=choice, parallel_tool_calls=None, response_format=None))


leaf = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"enum": ["red", "green", "blue"]}, {"type": "integer", "minimum": 3, "maximum": 9}, {"type": "string", "maxLength": 5},
    {"const": "fixed"},
])
names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


def objects(children):
    return st.builds(
        lambda props, required_share, closed: {
            "type": "object", "properties": props, "required": [k for i, k in enumerate(props) if i < len(props) * required_share],
            **({"additionalProperties": False} if closed else {}),
        },
        st.dictionaries(names, children, min_size=1, max_size=3), st.sampled_from([0.0, 0.5, 1.0]), st.booleans(),
    )


schemas = objects(st.recursive(leaf, lambda inner: objects(inner) | st.builds(
    lambda items, most: {"type": "array", "items": items, "maxItems": most}, inner, st.integers(1, 3)), max_leaves=6))
