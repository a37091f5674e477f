"""Hypothesis strategies of demanding JSON schemas and tool sets (patterns, formats, minimum
lengths, nested objects, arrays) and tool_choice values: the cases the closer (engines.grammar.closer)
is held to, in tests/engines/grammar/test_closer.py and through HTTP in tests/app/test_structured_limits.py."""

from __future__ import annotations

from hypothesis import strategies as st

leaf = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
    {"enum": ["red", "green", "blue"]}, {"type": "integer", "minimum": 3, "maximum": 9}, {"type": "string", "maxLength": 5},
    {"type": "string", "minLength": 6}, {"type": "string", "pattern": "(a+)+$"}, {"type": "string", "pattern": "^[A-Z]{3}$"},
    {"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"}, {"type": "string", "format": "date"}, {"type": "string", "format": "email"},
    {"type": "integer", "minimum": 100000}, {"type": "array", "items": {"type": "integer"}, "minItems": 2}, {"const": "fixed"},
])
names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


def objects(children):
    return st.builds(
        lambda props, required_share: {"type": "object", "properties": props,
                                       "required": [k for i, k in enumerate(props) if i < len(props) * required_share]},
        st.dictionaries(names, children, min_size=1, max_size=4), st.sampled_from([0.5, 1.0]),
    )


schemas = objects(st.recursive(leaf, lambda inner: objects(inner) | st.builds(
    lambda items, most: {"type": "array", "items": items, "maxItems": most}, inner, st.integers(1, 3)), max_leaves=8))


tool_names = st.lists(st.text(alphabet="abcdefgh_", min_size=1, max_size=12), min_size=1, max_size=3, unique=True)


tools = st.builds(lambda names_, params: [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in zip(names_, params)],
                  tool_names, st.lists(schemas, min_size=3, max_size=3))


choices = st.sampled_from(["required", "auto", "named"])
