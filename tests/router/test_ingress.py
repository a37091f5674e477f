"""The gateway's HTTP face (router.gateway.ingress), in process over the real FastAPI app: every error
in OpenAI's error body (a bad field named, bad JSON, an unknown route or model, a body over the
limit before it is read), and the served model names from the live policy. No engine is reached."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from policies.stores import DEFAULT_POLICY_PATH
from router.gateway.orchestration import MAX_BODY_BYTES


@pytest.fixture(scope="module")
def client():
    """`request(method, path, **kw)` -> the response of the app over a Gateway with no engines."""
    from router.gateway.ingress import api
    from router.gateway.orchestration import Gateway, replica_gateway

    gw = Gateway(None, None, policy_source=str(DEFAULT_POLICY_PATH))
    api.dependency_overrides[replica_gateway] = lambda: gw

    def request(method: str, path: str, **kw) -> httpx.Response:
        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://gateway") as c:
                return await c.request(method, path, **kw)

        return asyncio.run(go())

    request.gateway = gw
    yield request
    api.dependency_overrides.pop(replica_gateway, None)


def error(r: httpx.Response) -> dict:
    return r.json()["error"]


def test_the_models_are_the_live_policys_aliases(client):
    listed = [m["id"] for m in client("GET", "/v1/models").json()["data"]]
    assert listed == sorted(client.gateway.router.policy.forcing.model_aliases) and "tandem" in listed
    assert client("GET", "/v1/models/tandem").json()["id"] == "tandem"
    missing = client("GET", "/v1/models/gpt-9")
    assert missing.status_code == 404 and error(missing)["code"] == "model_not_found" and error(missing)["param"] == "model"


def test_a_bad_field_is_a_400_naming_it(client):
    r = client("POST", "/v1/chat/completions", json={"model": "tandem", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": "many"})
    assert r.status_code == 400 and error(r)["param"] == "max_tokens" and error(r)["type"] == "invalid_request_error"


def test_a_body_that_is_not_json_is_a_400(client):
    r = client("POST", "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and set(error(r)) == {"message", "type", "param", "code"}


def test_an_unknown_route_or_method_answers_in_openais_shape(client):
    r = client("GET", "/v1/nothing")
    assert r.status_code == 404 and "/v1/nothing" in error(r)["message"]
    r = client("GET", "/v1/chat/completions")
    assert r.status_code == 405 and "GET" in error(r)["message"]


def test_a_body_over_the_limit_is_a_413(client):
    r = client("POST", "/v1/chat/completions", content=b"x" * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"})
    assert r.status_code == 413 and str(MAX_BODY_BYTES) in error(r)["message"]


def test_health_answers_without_an_engine(client):
    assert client("GET", "/health").json() == {"status": "ok"}
