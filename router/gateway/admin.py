"""The admin API (`/admin/...`): the live policy (show, validate, apply, history, rollback), the
gateway's stats, its latest decisions (`/decisions`, what the console at /console shows), and a routing dry run (`POST /admin/route`: the decision the gateway would make
now for a chat request, load included, with nothing decoded or logged). Off (404) unless the admin token variable is set; every route needs
`Authorization: Bearer <token>` (compared in constant time). Hidden from the public OpenAPI
document. Errors are TandemErrors, answered by the ingress's one handler.

A policy write (and its dry run, `/policy/validate`) is `{"policy": {...}}`, a full policy that
states every field (one left out is a 400 naming it), or `{"patch": {...}}`, a JSON merge patch
laid over the current policy; `expect_version` and `note` go beside either. A body with neither
key is taken as the policy itself (the older bare form), so `{}` is a 400 listing every field.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import os
from typing import Any

from fastapi import APIRouter, Body, Depends, Query, Request

from engines.errors import InvalidRequestError, NotFoundError
from router.gateway.errors import AuthenticationError
from policies.stores import redact
from router.gateway.calls import chat_call
from router.gateway.decision_feed import FEED_SIZE
from router.gateway.orchestration import replica_gateway
from router.gateway.openai_api import ChatCompletionRequest
from router.gateway.schemas import check_off_loop
from router.gateway.structured import output_spec

ROUTE_API_KEY_HEADER = "x-tandem-route-api-key"  # the dry run's stand-in for the caller's API key (Authorization holds the admin token)

admin = APIRouter(prefix="/admin", include_in_schema=False)


def require_admin(request: Request, gw=Depends(replica_gateway)):
    """The replica's Gateway, once the caller has shown the admin token."""
    if not gw.admin_token:
        raise NotFoundError("the admin API is off: start Tandem with TANDEM_ADMIN_TOKEN set", code="admin_disabled")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), gw.admin_token.encode()):
        raise AuthenticationError("missing or wrong admin bearer token", code="invalid_admin_token", headers={"WWW-Authenticate": "Bearer"})
    return gw


def _int_field(body: dict, name: str, required: bool = False) -> int | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequestError(f"`{name}` must be an integer policy version; got {json.dumps(value)}", param=name, code="invalid_value")
    return value


WRITE_FIELDS = ("policy", "patch", "expect_version", "note")  # what a policy write body may hold


def _policy_write(body: dict) -> tuple[Any, bool]:
    """What a write body asks for: (a full policy, False) or (a patch, True)."""
    if "policy" not in body and "patch" not in body:
        return body, False  # the bare form: the body is the policy
    unknown = sorted(set(body) - set(WRITE_FIELDS))
    if unknown:  # e.g. a misspelt expect_version, which would skip the version check
        raise InvalidRequestError(f"unknown field(s) {', '.join(map(repr, unknown))}; a policy write takes "
                                  f"{', '.join(WRITE_FIELDS)}", param=unknown[0], code="invalid_value")
    if "policy" in body and "patch" in body:
        raise InvalidRequestError("send `policy` (a full policy) or `patch` (the fields to change), not both",
                                  param="patch", code="invalid_value")
    return (body["patch"], True) if "patch" in body else (body["policy"], False)


@admin.get("/policy")
async def show_policy(gw=Depends(require_admin)):
    return {"policy": gw.router.policy.model_dump(mode="json"), "store": redact(gw.router.store.status())}


@admin.post("/policy/validate")
async def validate_policy(body: dict[str, Any] = Body(...), gw=Depends(require_admin)):
    from policies.stores import check_write, resolve_write

    value, patch = _policy_write(body)
    policy = resolve_write(check_write(value, patch, "request body"), gw.router.policy, "request body")
    return {"valid": True, "policy": policy.model_dump(mode="json")}


@admin.post("/policy")
async def apply_policy(body: dict[str, Any] = Body(...), gw=Depends(require_admin)):
    value, patch = _policy_write(body)
    expect = _int_field(body, "expect_version")
    policy = gw.router.store.apply(value, expect_version=expect, note=str(body.get("note", "")), patch=patch)
    return {"version": policy.version, "policy": policy.model_dump(mode="json")}


@admin.get("/policy/history")
async def policy_history(gw=Depends(require_admin)):
    return {"history": [json.loads(r.to_json()) for r in gw.router.store.history()]}


@admin.post("/policy/rollback")
async def rollback_policy(body: dict[str, Any] = Body(...), gw=Depends(require_admin)):
    version = _int_field(body, "version", required=True)
    policy = gw.router.store.rollback(version, expect_version=_int_field(body, "expect_version"))
    return {"version": policy.version, "policy": policy.model_dump(mode="json")}


@admin.post("/route")
async def dry_run_route(body: ChatCompletionRequest, request: Request, gw=Depends(require_admin)):
    """The decision the gateway would make for this chat request now: the same checks, features,
    classifier, policy and live routing view as /v1/chat/completions, and nothing decoded or logged."""
    headers = {k: v for k, v in request.headers.items() if k != "authorization"}
    if ROUTE_API_KEY_HEADER in headers:  # API-key overrides apply as for that key's requests
        headers["authorization"] = f"Bearer {headers.pop(ROUTE_API_KEY_HEADER)}"
    call = chat_call(body, headers, await check_off_loop(output_spec, body))
    await gw.view.ready()
    policy = gw.router.policy
    decision = gw.router.decide(call.route, gw.view.view())
    return decision.model_dump(mode="json") | {
        "load_aware": policy.load_aware.enabled,  # the live view was applied (per the policy's load_aware)
        "routing": gw.view.snapshot(),
        "policy_version": policy.version,
    }


def _feed_positions(after: str) -> dict[str, int]:
    """`after` as the console sends it: `feed:seq` pairs, comma-separated (one per replica seen)."""
    positions = {}
    for part in filter(None, after.split(",")):
        feed, _, seq = part.partition(":")
        if not seq.isdigit():
            raise InvalidRequestError(f"`after` takes feed:seq pairs separated by commas; got {part!r}", param="after", code="invalid_value")
        positions[feed] = int(seq)
    return positions


@admin.get("/decisions")
async def recent_decisions(after: str = "", limit: int = Query(200, ge=1, le=FEED_SIZE), gw=Depends(require_admin)):
    """This replica's latest decisions and outcomes (no prompt text), oldest first: those after
    the seq that `after` gives for this replica's feed (all it keeps when it names none)."""
    seq = _feed_positions(after).get(gw.feed.id, 0)
    return {"feed": gw.feed.id, "last": gw.feed.last, "decisions": gw.feed.after(seq, limit)}


@admin.get("/stats")
async def stats(gw=Depends(require_admin)):
    from engines.process import ray_node, rss_mb
    from router.gateway import decisions_log

    loads, checkpoint = {}, None
    for name, handle in gw.engines.items():  # each engine deployment, with the modes it serves (router.decision.layouts)
        served = {"deployment": gw.layout.deployments[name], "modes": gw.layout.modes(name)}
        try:
            loads[name] = served | dataclasses.asdict(await asyncio.wait_for(handle.load(), timeout=2.0))
            checkpoint = checkpoint or (await asyncio.wait_for(handle.info(), timeout=2.0)).facts
        except Exception as exc:
            loads[name] = served | {"error": type(exc).__name__}
    log_stats = decisions_log.stats
    return gw.stats.snapshot() | {
        "layout": gw.layout.name,
        "checkpoint": checkpoint,  # what the engines serve: name, parameters, source, sha256 (every engine loads the same)
        "engines": loads,
        "routing": gw.view.snapshot(),
        "decisions_log": {"written": log_stats.written, "dropped": log_stats.dropped},
        "policy_version": gw.router.policy.version,
        "pid": os.getpid(),
        "rss_mb": rss_mb(),
        "node": ray_node(),
    }
