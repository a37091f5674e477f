"""A client's `x-request-id`, bounded the same everywhere: at most MAX_REQUEST_ID printable ASCII
characters, else a 400 before anything echoes or keeps it.

The id is the response body's `id`, the `/admin/decisions` feed's and the decisions log's key, and
Ray Serve's HTTP proxy echoes it as the response's `X-Request-ID` header. The proxy echoes it
before the app sees the request, so the bound is held in two places with one middleware:

- in the proxy (`proxy_middlewares`, named by RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH where
  Ray starts: `tandem serve` and tandem/local_app.py set it; a cluster started by hand exports
  it): a longer id is answered 400 there, without the echo;
- in the Gateway (router.gateway.ingress adds `RequestIdLimit`), so the body, the feed and the log
  never hold one even where the proxy runs without it (the proxy then echoes the refused id).

Import-light: the proxy imports this module (starlette only).
"""

from __future__ import annotations

import json

HEADER = "x-request-id"
MAX_REQUEST_ID = 128  # characters; the decisions log has always cut ids to this (router.gateway.decisions_log)
PROXY_CALLBACK_ENV = {"RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": "router.gateway.request_ids:proxy_middlewares"}


def request_id_problem(value: bytes) -> str | None:
    """What is wrong with an x-request-id header value, or None."""
    if len(value) > MAX_REQUEST_ID:
        return f"the x-request-id header is {len(value)} characters long; at most {MAX_REQUEST_ID}"
    if any(b < 0x20 or b > 0x7E for b in value):
        return "the x-request-id header must be printable ASCII"
    return None


def refusal(message: str) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The 400 in OpenAI's error shape: (body, headers)."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": HEADER,
                                 "code": "invalid_request_id"}}).encode()
    return body, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]


class RequestIdLimit:
    """ASGI middleware: a request whose x-request-id is over MAX_REQUEST_ID characters (or not
    printable ASCII) gets a 400 and never reaches the app."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                problem = request_id_problem(value) if name.lower() == HEADER.encode() else None
                if problem:
                    body, headers = refusal(problem)
                    await send({"type": "http.response.start", "status": 400, "headers": headers})
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)


def proxy_middlewares() -> list:
    """Ray Serve's HTTP proxy callback: middlewares around the proxy's own (its request-id echo included)."""
    from starlette.middleware import Middleware

    return [Middleware(RequestIdLimit)]
