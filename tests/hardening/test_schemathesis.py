"""schemathesis against the app's own OpenAPI document (/openapi.json): bodies generated from the
request schemas the gateway documents, every route, never a 5xx, errors in OpenAI's shape.

The served schema allows up to 1,000,000 `max_tokens`; the copy used here caps answers at 8 tokens
and names real models, so the run stays short and reaches the engines instead of stopping at 404."""

from __future__ import annotations

import copy

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings


BODY_ROUTES = ("/v1/chat/completions", "/v1/completions")
STATUSES: dict[str, int] = {}


def shipped_models() -> list[str]:
    """The model names the shipped policy serves (what /v1/models lists on an app with it)."""
    import yaml

    from policies.stores.base import DEFAULT_POLICY_PATH

    return sorted(yaml.safe_load(DEFAULT_POLICY_PATH.read_text())["forcing"]["model_aliases"])


def body_schema(doc: dict, path: str) -> dict:
    """A route's request body schema (FastAPI documents typed bodies as components)."""
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]] if "$ref" in schema else schema


def bounded(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for path in BODY_ROUTES:
        schema = body_schema(doc, path)
        props = schema["properties"]
        for field in ("max_tokens", "max_completion_tokens"):
            if field in props:
                props[field] = {"type": "integer", "minimum": 1, "maximum": 8}
        props["model"] = {"type": "string", "enum": shipped_models()}
        schema["required"] = sorted(set(schema.get("required", [])) | {"max_tokens"})
    return doc


@pytest.fixture(scope="module")
def api_schema(app_url):
    doc = httpx.get(f"{app_url}/openapi.json", timeout=10).json()
    for path in BODY_ROUTES:  # the gateway documents its typed bodies
        assert body_schema(doc, path)["properties"]["messages" if "chat" in path else "prompt"]
    assert not any(p.startswith("/admin") for p in doc["paths"]), "admin routes are not in the public schema"
    schema = schemathesis.openapi.from_dict(bounded(doc))
    schema.config.update(base_url=app_url)
    yield schema
    print(f"\nschemathesis: statuses {dict(sorted(STATUSES.items()))}")


def operations() -> list[tuple[str, str]]:
    """(method, path) of every documented route, from the gateway's FastAPI app."""
    from router.gateway.ingress import api

    doc = api.openapi()
    return [(method.upper(), path) for path, item in doc["paths"].items() for method in item]


# schemathesis' pytest integration (`schemathesis.pytest.from_fixture`) fails on pytest 9
# (`Function._nodeid`); its Hypothesis strategies work, so each route runs under `given` here.
@pytest.mark.parametrize("method,path", operations())
def test_no_route_answers_a_server_error(api_schema, method, path):
    operation = api_schema[path][method]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def check(case):
        response = case.call(timeout=60)
        STATUSES[str(response.status_code)] = STATUSES.get(str(response.status_code), 0) + 1
        assert response.status_code < 500, f"{case.method} {case.path}: {response.status_code} {response.text[:300]}"
        if response.status_code >= 400:
            error = response.json()["error"]
            assert error["message"] and error["type"]

    check()
