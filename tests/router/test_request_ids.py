"""Request ids (router/gateway/request_ids.py): the middleware that bounds a client's x-request-id,
around a small real Starlette app: an id within bounds reaches the app as sent; one too long or not
printable ASCII is a 400 in OpenAI's error shape that never reaches it; the proxy's middleware list
holds the same bound. (The served app's proxy is tested in tests/app/test_structured_limits.py.)"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from router.gateway.request_ids import MAX_REQUEST_ID, RequestIdLimit, proxy_middlewares, request_id_problem


def app_behind_the_limit(seen: list[str]):
    async def echo(request):
        seen.append(request.headers.get("x-request-id"))
        return JSONResponse({"ok": True})

    return RequestIdLimit(Starlette(routes=[Route("/v1/chat/completions", echo, methods=["POST"])]))


def post(app, request_id: str | bytes | None) -> httpx.Response:
    async def run():
        headers = {} if request_id is None else {"x-request-id": request_id}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as client:
            return await client.post("/v1/chat/completions", json={}, headers=headers)

    return asyncio.run(run())


@pytest.mark.parametrize("request_id", [None, "req-1", "a" * MAX_REQUEST_ID])
def test_an_id_within_bounds_reaches_the_app_as_sent(request_id):
    seen: list[str] = []
    r = post(app_behind_the_limit(seen), request_id)
    assert r.status_code == 200 and seen == [request_id]


@pytest.mark.parametrize("request_id, says", [("a" * (MAX_REQUEST_ID + 1), "129 characters long"), (b"id\x7fdel", "printable ASCII"),
                                              ("caf\u00e9".encode(), "printable ASCII")])
def test_a_bad_id_is_a_400_that_never_reaches_the_app(request_id, says):
    seen: list[str] = []
    r = post(app_behind_the_limit(seen), request_id)
    assert r.status_code == 400 and seen == []
    error = r.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "x-request-id", "invalid_request_id")
    assert says in error["message"] and int(r.headers["content-length"]) == len(r.content)


def test_the_problem_is_named_once_and_the_proxy_holds_the_same_bound():
    assert request_id_problem(b"ok-id") is None and request_id_problem(b"x" * (MAX_REQUEST_ID + 1))
    assert [m.cls for m in proxy_middlewares()] == [RequestIdLimit]
