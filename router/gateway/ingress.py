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

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from engines.errors import InvalidRequestError, NotFoundError, TandemError
from router.gateway.admin import admin
from router.gateway.calls import chat_call, completion_call
from router.gateway.console import console
from router.gateway.errors import MethodNotAllowedError, error_response
from router.gateway.read_limits import ARRIVED_AT, BodyLimit, ReadLimits
from router.gateway.orchestration import Gateway, replica_gateway as gateway
from router.gateway.openai_api import ChatCompletionRequest, CompletionRequest, validation_error
from router.gateway.request_ids import RequestIdLimit
from router.gateway.schemas import check_off_loop
from router.gateway.responses_answers import new_response_id, to_response
from router.gateway.responses_api import ResponsesRequest
from router.gateway.responses_chat import chat_request, responses_error
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


# ---- read limits (router.gateway.read_limits), outermost last ----------------------------------------

api.add_middleware(BodyLimit)
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
