"""Request schemas are bounded and local: nothing in a schema makes Tandem fetch a URL or read a file."""

from __future__ import annotations

import pytest

from engines.errors import InvalidRequestError
from router.gateway.schemas import MAX_DEPTH, compile_schema
from tests.listener import Listener


@pytest.fixture
def listener():
    with Listener() as server:
        yield server


def refused(schema) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        compile_schema(schema)
    err = info.value
    assert err.status == 400 and err.code == "invalid_schema" and err.param == "response_format.json_schema.schema"
    return err


def test_remote_refs_are_refused_and_never_fetched(listener):
    url = f"{listener.url}/slow.json"
    for schema in (
        {"$ref": url},
        {"type": "object", "properties": {"a": {"$ref": url}}},
        {"type": "array", "items": [{"anyOf": [{"$dynamicRef": url}]}]},
        {"$id": f"{listener.url}/base.json", "$ref": "other.json"},  # relative to a remote base
        {"$ref": "file:///etc/passwd"},
    ):
        assert "is not local" in refused(schema).message
    assert listener.hits == []


def test_local_refs_resolve_and_validate():
    check = compile_schema({
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/name"}},
        "required": ["city"],
        "$defs": {"name": {"type": "string", "minLength": 1}},
    })
    assert check.matches('{"city": "Paris"}')
    assert not check.matches('{"city": ""}') and not check.matches('{"town": "Paris"}') and not check.matches("not json")


def test_dangling_local_ref_is_refused_without_a_fetch(listener):
    err = refused({"$id": f"{listener.url}/base.json", "properties": {"a": {"$ref": "#/$defs/missing"}}})
    assert "does not point into the schema" in err.message
    assert listener.hits == []


def test_unknown_metaschema_is_not_fetched(listener):
    check = compile_schema({"$schema": f"{listener.url}/meta.json", "type": "object"})
    assert check.matches("{}")
    assert listener.hits == []


def test_deep_and_large_schemas_are_400s():
    deep = {"type": "string"}
    for _ in range(300):
        deep = {"not": deep}
    assert "deeper than" in refused(deep).message
    shallow_enough = {"type": "string"}
    for _ in range(MAX_DEPTH // 2 - 1):
        shallow_enough = {"not": shallow_enough}
    compile_schema(shallow_enough)
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(2000)}}
    assert "bytes" in refused(big).message


def test_invalid_schema_names_the_problem():
    assert "not a valid JSON Schema" in refused({"type": "strnig"}).message


def test_data_keywords_are_not_read_as_references(listener):
    check = compile_schema({"const": {"$ref": f"{listener.url}/x"}})
    assert check.matches('{"$ref": "%s/x"}' % listener.url)
    assert listener.hits == []


def test_json_object_accepts_any_object():
    check = compile_schema(None)
    assert check.matches('{"a": 1}') and not check.matches("[1]")
