"""Bounds on how a request arrives, as ASGI middleware around the app (router.gateway.ingress adds them): a body
over the limit is a 413 without reading the rest (`BodyLimit`); header lines over TANDEM_MAX_HEADER_BYTES are a
431 and a body not in full TANDEM_BODY_TIMEOUT_S after the request arrived is a 408, both closing the connection
(`ReadLimits`). Ray's proxy builds uvicorn's config from its own fields only, so the app holds these itself."""

from __future__ import annotations

import asyncio
import logging
import os
import time

from fastapi.responses import JSONResponse
from ray.exceptions import TaskCancelledError

from engines.errors import TandemError
from router.gateway.errors import HeadersTooLargeError, PayloadTooLargeError, RequestTimeoutError, error_response
from router.gateway.orchestration import MAX_BODY_BYTES, replica_gateway as gateway

log = logging.getLogger("tandem.gateway")


class BodyLimit:
    """ASGI middleware: 413 before a body over the gateway's limit is read, by its declared length,
    else by counting what arrives; a body within the limit is replayed to the route."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = _body_limit()
        too_large = error_response(PayloadTooLargeError(f"request body over {limit} bytes"))
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            return await too_large(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                return await too_large(scope, receive, send)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then the client's disconnect, which cancels abandoned streams

        return await self.app(scope, replay, send)


def _body_limit() -> int:
    try:
        return gateway().max_body_bytes
    except Exception:  # no replica context (in-process tests): the default
        return MAX_BODY_BYTES


# ---- slow and oversized clients --------------------------------------------------------------------
# Ray Serve 2.60's proxy (uvicorn with httptools) bounds neither the size of a request's headers nor
# the time its body takes to arrive; these bounds hold in the Gateway replica, which sees a request
# once its headers are in. Environment overrides are read where the replica imports this module.

MAX_HEADER_BYTES = int(os.environ.get("TANDEM_MAX_HEADER_BYTES", 32 * 1024))  # all header lines; over it: 431
BODY_TIMEOUT_S = float(os.environ.get("TANDEM_BODY_TIMEOUT_S", 30.0))  # the whole body, from arrival; else 408


class _BodyTimeout(Exception):
    pass


ARRIVED_AT = "tandem.arrived_at"  # the ASGI scope's key for time.perf_counter() when the request reached the gateway


def _closing_error(err: TandemError) -> JSONResponse:
    err.headers["Connection"] = "close"  # the connection holds unread bytes
    return error_response(err)


class ReadLimits:
    """ASGI middleware, outside BodyLimit: 431 for a request whose header lines (`name: value` and
    CRLF) total over MAX_HEADER_BYTES; 408 when its body has not arrived in full BODY_TIMEOUT_S
    after the request reached the gateway. Both answers close the connection. Once the body is in,
    `receive()` is not bounded (a streamed response waits on it for the client's disconnect)."""

    def __init__(self, app, max_header_bytes: int | None = None, body_timeout_s: float | None = None):
        self.app = app
        self.max_header_bytes = max_header_bytes or MAX_HEADER_BYTES
        self.body_timeout_s = body_timeout_s or BODY_TIMEOUT_S

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        scope[ARRIVED_AT] = time.perf_counter()  # a latency for the requests refused before the Gateway's own clock starts
        size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if size > self.max_header_bytes:
            too_large = _closing_error(HeadersTooLargeError(f"request headers total {size} bytes, over {self.max_header_bytes}"))
            return await too_large(scope, receive, send)
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        body_done = response_started = False

        async def bounded_receive():
            nonlocal body_done
            if body_done:
                try:
                    return await receive()
                except TaskCancelledError:  # Ray's proxy cancels the wait when the client goes away: a disconnect
                    return {"type": "http.disconnect"}
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise _BodyTimeout from None
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def tracked_send(message):
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracked_send)
        except _BodyTimeout:
            log.info("request body not received in %.0f s: 408", self.body_timeout_s)
            if not response_started:
                timed_out = _closing_error(RequestTimeoutError(f"request body not received in full within {self.body_timeout_s:g} s"))
                await timed_out(scope, receive, send)
