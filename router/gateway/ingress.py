"""The HTTP face of the gateway: the FastAPI app, its routes, body limits and one error handler.

Routes are thin: FastAPI validates each body against the pydantic models of `router.gateway.openai_api`
(its `RequestValidationError` becomes a 400 naming the first bad field), and the replica's
`Gateway` serves it. Every error a client sees is a `TandemError` (engines.errors) answered here
with OpenAI's error body, its status and headers; anything else is a logged 500.

`api` is declared at module level so Ray Serve's `serve.ingress(api)` can bind it to the Gateway
class (router.app); nothing is created or connected until `Gateway.__init__` runs in a replica.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from ray.exceptions import TaskCancelledError
from starlette.exceptions import HTTPException

from engines.errors import InvalidRequestError, NotFoundError, TandemError
from policies.stores import redact
from router.gateway.admin import admin
from router.gateway.calls import chat_call, completion_call
from router.gateway.console import console
from router.gateway.errors import HeadersTooLargeError, MethodNotAllowedError, PayloadTooLargeError, RequestTimeoutError
from router.gateway.orchestration import MAX_BODY_BYTES, Gateway, replica_gateway as gateway
from router.gateway.openai_api import ChatCompletionRequest, CompletionRequest, validation_error
from router.gateway.request_ids import RequestIdLimit
from router.gateway.schemas import check_off_loop
from router.gateway.responses_answers import new_response_id, to_response
from router.gateway.responses_api import ResponsesRequest, chat_request, responses_error
from router.gateway.responses_events import ResponseEvents, translate_stream
from router.gateway.responses_store import ResponseStore, conversation_items, history_for, stores
from router.gateway.structured import output_spec

log = logging.getLogger("tandem.gateway")

# No /docs or /redoc: FastAPI's pages load their assets from a CDN and render blank offline;
# the schema itself is served at /openapi.json.
api = FastAPI(title="Tandem", description="One OpenAI-compatible endpoint for a block-diffusion LM.", version="0.1.0",
              docs_url=None, redoc_url=None)
api.include_router(admin)
api.include_router(console)
CREATED = 1_764_460_800  # the `created` time /v1/models reports


# ---- errors: one shape --------------------------------------------------------------------------------


def error_response(exc: TandemError) -> JSONResponse:
    body = exc.body()
    body["error"]["message"] = redact(body["error"]["message"])  # a store error may name a URL with credentials
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


@api.exception_handler(TandemError)
async def _tandem_error(_request: Request, exc: TandemError):
    return error_response(exc)


@api.exception_handler(RequestValidationError)
async def _invalid_body(request: Request, exc: RequestValidationError):
    error = validation_error(list(exc.errors()))
    if request.url.path.startswith("/v1/"):  # an API request refused by its schema: counted with its latency, as any other outcome
        try:
            records = gateway().records
        except Exception:  # no replica context (in-process tests)
            records = None
        if records is not None:
            records.error(error.status, code=error.code, started=request.scope.get(ARRIVED_AT))
    return error_response(error)


@api.exception_handler(HTTPException)
async def _http_error(request: Request, exc: HTTPException):
    if exc.status_code == 404:
        return error_response(NotFoundError(f"no route {request.method} {request.url.path}"))
    if exc.status_code == 405:
        return error_response(MethodNotAllowedError(f"method {request.method} not allowed on {request.url.path}"))
    if exc.status_code == 400:  # FastAPI could not parse the body (e.g. an integer over Python's digit limit)
        return error_response(InvalidRequestError(f"request body is not valid JSON: {exc.detail}", code="invalid_json"))
    body = {"error": {"message": str(exc.detail), "type": "invalid_request_error" if exc.status_code < 500 else "server_error",
                      "param": None, "code": "http_error"}}  # any other status Starlette raises, passed through
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


@api.exception_handler(Exception)
async def _unexpected(_request: Request, exc: Exception):
    log.exception("unhandled error")
    return error_response(TandemError(f"internal error: {type(exc).__name__}"))


# ---- body limit ----------------------------------------------------------------------------------------


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


api.add_middleware(BodyLimit)


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


api.add_middleware(RequestIdLimit)  # an x-request-id over 128 characters: 400 (the proxy holds the same bound: router.gateway.request_ids)
api.add_middleware(ReadLimits)  # added last: outermost, so BodyLimit reads the body through its deadline


# ---- routes -------------------------------------------------------------------------------------------


@api.get("/metrics", include_in_schema=False)
async def metrics(gw: Gateway = Depends(gateway)):
    """Prometheus text format, from the same OpenTelemetry instruments as every other exporter,
    summed over every Gateway replica (router.gateway.metrics_aggregate)."""
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(content=await gw.metrics_text(), media_type=CONTENT_TYPE_LATEST)


def served_models(gw: Gateway) -> list[str]:
    """The model names this Gateway serves: the live policy's model aliases (`forcing.model_aliases`),
    the same names `Router.decide` accepts."""
    return sorted(gw.router.policy.forcing.model_aliases)


@api.get("/v1/models")
async def models(gw: Gateway = Depends(gateway)):
    return {"object": "list", "data": [{"id": m, "object": "model", "created": CREATED, "owned_by": "tandem"} for m in served_models(gw)]}


@api.get("/v1/models/{model_id}")
async def model(model_id: str, gw: Gateway = Depends(gateway)):
    served = served_models(gw)
    if model_id not in served:
        raise NotFoundError(f"model {model_id!r} does not exist; available: {', '.join(served)}", code="model_not_found", param="model")
    return {"id": model_id, "object": "model", "created": CREATED, "owned_by": "tandem"}


@api.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, request: Request, gw: Gateway = Depends(gateway)):
    output = await check_off_loop(output_spec, body)
    return await gw.serve(chat_call(body, dict(request.headers), output), dict(request.headers))


@api.post("/v1/responses")
async def responses(body: ResponsesRequest, request: Request, gw: Gateway = Depends(gateway)):
    """The Responses API, served by the chat path: items in, items (and Responses events) out, rendered
    from the gateway's typed answer (no chat JSON in between).
    With Redis configured, conversations are kept (a TTL) for `previous_response_id`."""
    keep = gw.redis is not None and gw.responses_ttl_s > 0
    store = ResponseStore(gw.redis, prefix=f"{gw.key_prefix}response:", ttl_s=gw.responses_ttl_s) if keep else None
    history = await asyncio.to_thread(history_for, body, store)
    chat = chat_request(body, history)
    headers, response_id = dict(request.headers), new_response_id()
    try:
        output = await check_off_loop(output_spec, chat)
        reply = await gw.answer(chat_call(chat, headers, output), headers)
    except TandemError as exc:  # found on the chat path: named as the client named it
        raise responses_error(exc, body) from None
    async def keep(response: dict) -> bool:
        """Store the finished response; whether it was (the object's `store` then tells the client:
        an id that a later previous_response_id cannot find is never handed out as if stored)."""
        if not stores(body, store):
            return False
        return await asyncio.to_thread(store.save, response_id, conversation_items(body, history, response))

    if not body.stream:
        response = to_response(reply.answer, body, response_id)
        response["store"] = await keep(response)
        return JSONResponse(response, headers=reply.headers)
    events = ResponseEvents(body, response_id)

    async def sse():
        async for event in translate_stream(reply.parts, events, keep):
            yield event

    return StreamingResponse(sse(), media_type="text/event-stream", headers=reply.headers)


@api.post("/v1/completions")
async def completions(body: CompletionRequest, request: Request, gw: Gateway = Depends(gateway)):
    return await gw.serve(completion_call(body, dict(request.headers)), dict(request.headers))


@api.get("/health")
async def health():
    return {"status": "ok"}


@api.get("/ready")
async def ready(gw: Gateway = Depends(gateway)):
    return await gw.ready()
