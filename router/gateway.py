"""The Gateway: FastAPI ingress of the Ray Serve app. OpenAI API, routing, orchestration, admin API.

One request: validate (OpenAI schema, 400 with OpenAI's error body) -> `Router.decide` (learned
prediction + live policy) -> the engine deployment for the decided mode (`BlockEngine` serves
block and verified, `AREngine` serves AR), with a bounded wait -> on engine failure or timeout,
the policy's `on_engine_failure` mode, else 503 -> for `response_format` JSON, a block answer
that does not parse (or match the schema) is retried in the policy's `safe_mode` -> the OpenAI
response (or SSE chunks) with the decision in headers and in a `tandem` body object; an
OpenTelemetry span tree and metrics; the decision and its outcome appended to the Redis stream
`tandem:decisions` off the request path.

`api` is declared at module level so routes can be declared on the class (Ray Serve's pattern);
nothing is created or connected until `Gateway.__init__` runs in a replica.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import json
import logging
import os
import time

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from opentelemetry import trace
from pydantic import ValidationError

from engines.deployment import EngineFailure, rss_mb
from engines.defaults import DEFAULT_MAX_TOKENS
from engines.types import ENGINE_OF_MODE, GenerationRequest, GenerationResult
from policies.stores import redact
from router.routing_view import Backlog, Calibration
from router.schemas import SchemaCheck, check_off_loop, compile_schema
from router.openai_api import (
    DONE,
    ApiError,
    ChatCompletionRequest,
    CompletionRequest,
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    new_id,
    sse,
    usage,
    validation_error,
)

log = logging.getLogger("tandem.gateway")

api = FastAPI(title="Tandem", description="One OpenAI-compatible endpoint for a block-diffusion LM.", version="0.1.0")

MODELS = ("tandem", "tandem-block", "tandem-verified", "tandem-ar")


@api.exception_handler(ApiError)
async def _api_error(_request: Request, exc: ApiError):
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


@api.exception_handler(404)
async def _not_found(request: Request, _exc):
    return JSONResponse(ApiError(404, f"no route {request.method} {request.url.path}", code="not_found").body(), status_code=404)


@api.exception_handler(405)
async def _not_allowed(request: Request, _exc):
    return JSONResponse(ApiError(405, f"method {request.method} not allowed on {request.url.path}", code="method_not_allowed").body(), status_code=405)


@api.exception_handler(Exception)
async def _unexpected(_request: Request, exc: Exception):
    log.exception("unhandled error")
    return JSONResponse(ApiError(500, f"internal error: {type(exc).__name__}", type="server_error", code="internal_error").body(), status_code=500)


class Gateway:
    def __init__(
        self,
        block_engine,
        ar_engine,
        policy_source: str | None = None,
        router_model: str | None = None,
        redis_url: str | None = None,
        key_prefix: str = "tandem:",
        admin_token_env: str = "TANDEM_ADMIN_TOKEN",
        telemetry: str = "none",
        request_timeout_s: float = 120.0,
        max_body_bytes: int = 4 * 1024 * 1024,
    ):
        from policies.stores import store_kind
        from router.decide import Router
        from router.telemetry import GatewayStats, Telemetry

        self.engines = {"block": block_engine, "ar": ar_engine}
        source = policy_source or os.environ.get("TANDEM_POLICY_SOURCE")
        store_kwargs = {"prefix": key_prefix} if source and store_kind(source) == "redis" else {}
        self.router = Router(model_path=router_model, policy_source=source, **store_kwargs)
        self.redis = None
        if redis_url:
            import redis

            self.redis = redis.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.decisions_stream = f"{key_prefix}decisions"
        self.admin_token = os.environ.get(admin_token_env) or None
        self.telemetry = Telemetry(telemetry)
        self.stats = GatewayStats()
        self.timeout_s = request_timeout_s
        self.max_body_bytes = max_body_bytes
        self.loads: dict[str, float] = {}  # engine -> queue fill (queued / max_queue)
        self.queues: dict[str, dict] = {}  # engine -> queued, running, capacity, as last polled (cost-aware routing)
        # Requests this gateway has at each engine now. The poll is up to 0.5 s old; a burst of
        # requests routed inside that window would all see the same idle engine without this.
        self.in_flight: dict[str, int] = {"block": 0, "ar": 0}
        self.completed_since_poll: dict[str, int] = {"block": 0, "ar": 0}  # the poll may count requests since done
        self.block_backlog = Backlog()  # estimated work ahead of the block engine (cost-aware routing)
        self.calibration = {"block": Calibration(), "ar": Calibration()}  # observed / estimated time per engine
        self.canvas_limit: int | None = None  # the checkpoint's canvas_length, read from an engine once
        self._load_task: asyncio.Task | None = None
        self._first_poll: asyncio.Event | None = None  # set once the cost profile and a first queue view are in
        self._background: set[asyncio.Task] = set()

    # ---- OpenAI API -------------------------------------------------------------------------------

    async def models(self):
        created = 1_764_460_800
        return {"object": "list", "data": [{"id": m, "object": "model", "created": created, "owned_by": "tandem"} for m in MODELS]}

    async def model(self, model_id: str):
        if model_id not in MODELS:
            raise ApiError(404, f"model {model_id!r} does not exist; available: {', '.join(MODELS)}", code="model_not_found", param="model")
        return {"id": model_id, "object": "model", "created": 1_764_460_800, "owned_by": "tandem"}

    async def chat_completions(self, request: Request):
        body = await self._json_body(request)
        try:
            req = ChatCompletionRequest.model_validate(body)
            messages = req.engine_messages()
        except ValidationError as exc:
            raise validation_error(exc) from None
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_value", param="messages") from None
        fmt = req.response_format
        schema_check = None
        if fmt is not None and fmt.type != "text":
            schema_check = await check_off_loop(compile_schema, fmt.schema_())
        gen = GenerationRequest(messages=messages)
        return await self._serve(request, req, gen, chat=True, schema_check=schema_check)

    async def completions(self, request: Request):
        body = await self._json_body(request)
        try:
            req = CompletionRequest.model_validate(body)
        except ValidationError as exc:
            raise validation_error(exc) from None
        gen = GenerationRequest(prompt=req.prompt)
        return await self._serve(request, req, gen, chat=False)

    async def health(self):
        return {"status": "ok"}

    async def ready(self):
        self._refresh_loads()  # the routing view (cost profile, queues) starts filling before traffic does
        try:
            infos = await asyncio.wait_for(asyncio.gather(*(h.info.remote() for h in self.engines.values())), timeout=5.0)
        except Exception as exc:
            raise ApiError(503, f"engines not ready: {type(exc).__name__}", type="server_error", code="not_ready") from None
        return {"status": "ready", "engines": dict(zip(self.engines, infos)), "policy_version": self.router.policy.version}

    # ---- admin API --------------------------------------------------------------------------------

    def _admin(self, request: Request) -> None:
        if not self.admin_token:
            raise ApiError(404, "the admin API is off: start Tandem with TANDEM_ADMIN_TOKEN set", code="admin_disabled")
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), self.admin_token.encode()):
            raise ApiError(401, "missing or wrong admin bearer token", type="authentication_error", code="invalid_admin_token",
                           headers={"WWW-Authenticate": "Bearer"})

    async def admin_policy(self, request: Request):
        self._admin(request)
        return {"policy": self.router.policy.model_dump(mode="json"), "store": redact(self.router.store.status())}

    async def admin_validate(self, request: Request):
        self._admin(request)
        from policies import validate_policy

        body = await self._json_body(request)
        with _policy_errors():
            policy = validate_policy(body.get("policy", body), source="request body")
        return {"valid": True, "policy": policy.model_dump(mode="json")}

    async def admin_apply(self, request: Request):
        self._admin(request)
        body = await self._json_body(request)
        with _policy_errors():
            policy = self.router.store.apply(body.get("policy", body), expect_version=body.get("expect_version"), note=str(body.get("note", "")))
        return {"version": policy.version, "policy": policy.model_dump(mode="json")}

    async def admin_history(self, request: Request):
        self._admin(request)
        with _policy_errors():
            records = self.router.store.history()
        return {"history": [json.loads(r.to_json()) for r in records]}

    async def admin_rollback(self, request: Request):
        self._admin(request)
        body = await self._json_body(request)
        if not isinstance(body.get("version"), int):
            raise ApiError(400, "body needs an integer `version` to roll back to", param="version")
        with _policy_errors():
            policy = self.router.store.rollback(body["version"], expect_version=body.get("expect_version"))
        return {"version": policy.version, "policy": policy.model_dump(mode="json")}

    async def admin_stats(self, request: Request):
        self._admin(request)
        from router import decisions_log

        loads = {}
        for name, handle in self.engines.items():
            try:
                loads[name] = await asyncio.wait_for(handle.load.remote(), timeout=2.0)
            except Exception as exc:
                loads[name] = {"error": type(exc).__name__}
        log_stats = decisions_log.stats
        now = time.monotonic()
        return self.stats.snapshot() | {
            "engines": loads,
            "routing": {"calibration": {e: round(c.factor, 3) for e, c in self.calibration.items()},
                        "block_backlog_ms": round(self.block_backlog.ahead_ms(now), 1), "in_flight": dict(self.in_flight)},
            "decisions_log": {"written": log_stats.written, "dropped": log_stats.dropped},
            "policy_version": self.router.policy.version,
            "pid": os.getpid(),
            "rss_mb": rss_mb(),
        }

    # ---- orchestration ----------------------------------------------------------------------------

    async def _json_body(self, request: Request) -> dict:
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise ApiError(413, f"request body over {self.max_body_bytes} bytes", code="request_too_large")
        raw = await request.body()
        if len(raw) > self.max_body_bytes:
            raise ApiError(413, f"request body over {self.max_body_bytes} bytes", code="request_too_large")
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ApiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object", code="invalid_json")
        return body

    def _refresh_loads(self) -> None:
        """Keep a recent view of each engine's queue, off the request path (load-aware routing)."""
        if self._first_poll is None:
            self._first_poll = asyncio.Event()
        if self._load_task is None or self._load_task.done():
            self._load_task = asyncio.ensure_future(self._poll_loads())

    async def _routing_view_ready(self) -> None:
        """The first requests wait (at most a second) for the cost profile and a first queue view, so
        a burst arriving at a fresh replica is routed by cost and counted in the backlog too."""
        self._refresh_loads()
        if not self._first_poll.is_set():
            try:
                await asyncio.wait_for(self._first_poll.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass

    def _queue_view(self) -> dict[str, dict]:
        """Each engine's occupancy for cost-aware routing: the polled view less what finished since
        (the poll may be half a second old), or this gateway's own in-flight count when that is
        higher (a burst routed since the poll); the block engine's backlog; each engine's calibration."""
        view = {}
        for name, q in self.queues.items():
            polled = max(0, q["queued"] + q["running"] - self.completed_since_poll.get(name, 0))
            total = max(polled, self.in_flight.get(name, 0))
            running = min(total, q["capacity"])
            view[name] = {"queued": total - running, "running": running, "capacity": q["capacity"], "calibration": self.calibration[name].factor}
        if "block" in view:
            view["block"]["backlog_ms"] = self.block_backlog.ahead_ms(time.monotonic())
        return view

    def _dispatched(self, gen: GenerationRequest, decision=None) -> _Ticket:
        """Count `gen` in its engine's in-flight requests, with the cost profile's estimate of its
        finish (to calibrate against) and, on the block engine, its work in the backlog."""
        engine = ENGINE_OF_MODE[gen.mode]
        ticket = _Ticket(engine, time.monotonic())
        cost = self.engines.cost
        if cost is not None:
            tokens = max(1, min(decision.predicted_tokens, gen.max_new_tokens) if decision else gen.max_new_tokens)
            steps, task = gen.max_denoising_steps or cost.steps, decision.task if decision else None
            ticket.estimate_ms = self.router.finish_estimate(gen.mode, tokens, steps, gen.canvas, task, self._queue_view())
            if engine == "block":
                ticket.backlog_end = self.block_backlog.add(cost.service_ms(gen.mode, tokens, steps, gen.canvas, task), ticket.started)
        self.in_flight[engine] += 1
        return ticket

    def _returned(self, ticket: _Ticket, ok: bool) -> None:
        now = time.monotonic()
        self.in_flight[ticket.engine] -= 1
        self.completed_since_poll[ticket.engine] += 1
        if ticket.backlog_end is not None:
            self.block_backlog.done(ticket.backlog_end, now)
        if ok and ticket.estimate_ms:
            self.calibration[ticket.engine].observe((now - ticket.started) * 1000.0, ticket.estimate_ms)

    async def _canvas_limit(self) -> int | None:
        if self.canvas_limit is None:
            try:
                info = await asyncio.wait_for(self.engines["block"].info.remote(), timeout=5.0)
                self.canvas_limit = int(info["canvas_length"])
            except Exception:
                return None  # the engine itself refuses an oversized canvas
        return self.canvas_limit

    async def _poll_loads(self) -> None:
        from engines.cost import CostProfile

        try:
            raw = await asyncio.wait_for(self.engines["block"].cost_profile.remote(), timeout=5.0)
            if raw:
                self.engines.cost = CostProfile(**raw)
        except Exception:
            log.warning("no cost profile from the engines: cost-aware routing stays off")
        await self._canvas_limit()  # fetched once here, so a first burst does not each wait for it
        while True:
            for name, handle in self.engines.items():
                try:
                    load = await asyncio.wait_for(handle.load.remote(), timeout=1.0)
                    self.loads[name] = load["queue_ratio"]
                    self.queues[name] = {k: load[k] for k in ("queued", "running", "capacity")}
                    self.completed_since_poll[name] = 0
                except Exception:
                    self.loads[name] = 1.0  # unreachable counts as full
                    self.queues.pop(name, None)
            self.telemetry.set_queue_depth(self.loads)
            self._first_poll.set()
            await asyncio.sleep(0.5)

    async def _serve(self, http: Request, req, gen: GenerationRequest, chat: bool, schema_check: SchemaCheck | None = None):
        from router.errors import RouterError
        from router.types import RouteRequest

        await self._routing_view_ready()
        rid = http.headers.get("x-request-id") or new_id("chatcmpl" if chat else "cmpl")
        api_key = http.headers.get("authorization", "").partition(" ")[2] or None
        budget = req.token_budget()
        route_messages = gen.messages if chat else [{"role": "user", "content": req.prompt}]
        started = time.perf_counter()
        with self.telemetry.tracer.start_as_current_span("tandem.request", attributes={"request.id": rid, "request.model": req.model, "request.stream": req.stream}) as root:
            with self.telemetry.tracer.start_as_current_span("tandem.route") as route_span:
                try:
                    route = RouteRequest(
                        messages=route_messages, model=req.model, max_tokens=budget,
                        response_format=req.response_format.model_dump() if getattr(req, "response_format", None) else None,
                        tools=getattr(req, "tools", None), stop=req.stop, headers=dict(http.headers), api_key=api_key, request_id=rid,
                    )
                    decision = self.router.decide(
                        route, load={m: self.loads.get(ENGINE_OF_MODE[m], 0.0) for m in ENGINE_OF_MODE}, queues=self._queue_view()
                    )
                except RouterError as exc:
                    self.stats.error(exc.status)
                    status = 404 if exc.code == "model_not_found" else exc.status
                    raise ApiError(status, exc.message, type=exc.type, code=exc.code, param=exc.param) from None
                except ValidationError as exc:
                    raise validation_error(exc) from None
                route_span.set_attributes({f"decision.{k}": v for k, v in decision.model_dump().items() if v is not None and not isinstance(v, dict)})
            limit = await self._canvas_limit() if decision.canvas else None
            gen = dataclasses.replace(
                gen, mode=decision.mode, max_new_tokens=budget or DEFAULT_MAX_TOKENS, temperature=req.temperature or 0.0,
                top_p=req.top_p or 1.0, stop=req.stop or [], seed=req.seed,
                canvas=min(decision.canvas, limit) if decision.canvas and limit else decision.canvas,
                max_denoising_steps=decision.steps, request_id=rid,
            )
            headers = decision.headers()  # Ray Serve's proxy adds x-request-id (the id in the body)
            root.set_attribute("tandem.mode", decision.mode)
            if req.stream:
                opened = await self._open_stream(gen)
                headers |= {"x-tandem-mode": opened[2]} | ({"x-tandem-degraded": "true"} if opened[3] else {})
                body = self._stream(req, gen, opened, decision, route, chat, rid, started)
                return StreamingResponse(body, media_type="text/event-stream", headers=headers)
            result, mode, degraded = await self._generate(gen, decision)
            if schema_check and not await check_off_loop(schema_check.matches, result.text) and mode == "block":
                retry_mode = self.router.policy.safe_mode
                with self.telemetry.tracer.start_as_current_span("tandem.json_retry", attributes={"mode": retry_mode}):
                    result, mode, degraded = await self._generate(dataclasses.replace(gen, mode=retry_mode), decision)
            if schema_check and not await check_off_loop(schema_check.matches, result.text):
                self.stats.error(422)
                raise ApiError(422, "the model's answer is not JSON matching response_format, even after a retry in "
                               f"{mode} mode", code="response_format_unsatisfied", param="response_format")
            self._finish(result, mode, degraded, decision, route, started)
            if decision.shadow_verify and mode == "block":
                self._spawn(self._shadow_verify(gen, result.token_ids))
            headers |= {"x-tandem-mode": mode} | ({"x-tandem-degraded": "true"} if degraded else {})
            build = chat_response if chat else completion_response
            body = build(rid, req.model, result.text, result.finish_reason, usage(result.stats.prompt_tokens, result.stats.output_tokens),
                         self._tandem(decision, result, mode, degraded))
            return JSONResponse(body, headers=headers)

    async def _generate(self, gen: GenerationRequest, decision=None) -> tuple[GenerationResult, str, bool]:
        """Run `gen` on its engine; on failure or timeout, once more in the policy's degrade mode."""
        mode, last_error = gen.mode, None
        for attempt in range(2):
            request = gen if attempt == 0 else dataclasses.replace(gen, mode=mode)
            with self.telemetry.tracer.start_as_current_span("tandem.engine", attributes={"mode": mode, "attempt": attempt}) as span:
                engine = ENGINE_OF_MODE[mode]
                ticket = self._dispatched(request, decision)
                out = None
                try:
                    out = await asyncio.wait_for(self.engines[engine].generate.remote(request), timeout=self.timeout_s)
                except asyncio.TimeoutError:
                    out = EngineFailure(503, "engine_timeout", "server_error", f"the {mode} engine did not answer in {self.timeout_s:.0f} s")
                except Exception as exc:  # replica died, actor unavailable, ...
                    out = EngineFailure(503, "engine_unavailable", "server_error", f"the {mode} engine failed: {type(exc).__name__}")
                finally:
                    self._returned(ticket, ok=isinstance(out, GenerationResult))
                if isinstance(out, GenerationResult):
                    _engine_span(self.telemetry.tracer, span, out)
                    return out, mode, attempt > 0
                span.set_attribute("error.code", out.code)
            last_error = out
            if out.status != 503:
                break
            mode = self.router.policy.on_engine_failure.get(mode)
            if mode is None:
                break
        self.stats.error(last_error.status)
        headers = {"Retry-After": str(max(1, round(last_error.retry_after_s)))} if last_error.retry_after_s else {}
        raise ApiError(last_error.status, last_error.message, type=last_error.type, code=last_error.code, param=last_error.param, headers=headers)

    async def _open_stream(self, gen: GenerationRequest):
        """Start `gen` streaming and wait for its first item, so that a full queue is a real 429 (with
        Retry-After) and a failed engine degrades per policy before any byte is sent.
        Returns (stream, first item or None, mode, degraded)."""
        mode, last = gen.mode, None
        for attempt in range(2):
            request = gen if attempt == 0 else dataclasses.replace(gen, mode=mode)
            stream = self.engines[ENGINE_OF_MODE[mode]].options(stream=True).stream.remote(request)
            try:
                first = await asyncio.wait_for(stream.__anext__(), timeout=self.timeout_s)
            except StopAsyncIteration:
                return stream, None, mode, attempt > 0
            except asyncio.TimeoutError:
                first = EngineFailure(503, "engine_timeout", "server_error", f"the {mode} engine did not answer in {self.timeout_s:.0f} s")
            except Exception as exc:
                first = EngineFailure(503, "engine_unavailable", "server_error", f"the {mode} engine failed: {type(exc).__name__}")
            if not isinstance(first, EngineFailure):
                return stream, first, mode, attempt > 0
            stream.cancel()
            last = first
            if first.status != 503 or (mode := self.router.policy.on_engine_failure.get(mode)) is None:
                break
        self.stats.error(last.status)
        headers = {"Retry-After": str(max(1, round(last.retry_after_s)))} if last.retry_after_s else {}
        raise ApiError(last.status, last.message, type=last.type, code=last.code, param=last.param, headers=headers)

    async def _stream(self, req, gen: GenerationRequest, opened, decision, route, chat: bool, rid: str, started: float):
        stream, first, mode, degraded = opened
        created = int(time.time())
        chunk = (lambda **kw: chat_chunk(rid, req.model, created, **kw)) if chat else None
        ticket = self._dispatched(dataclasses.replace(gen, mode=mode), decision)
        finished = False
        try:
            if chat:
                yield chunk(delta={"role": "assistant", "content": ""})
            item = first
            while item is not None:
                if isinstance(item, str):
                    yield chunk(delta={"content": item}) if chat else completion_chunk(rid, req.model, created, item)
                elif isinstance(item, GenerationResult):
                    finished = True
                    self._finish(item, mode, degraded, decision, route, started)
                    tandem = self._tandem(decision, item, mode, degraded)
                    yield chunk(delta={}, finish_reason=item.finish_reason, tandem=tandem) if chat else completion_chunk(
                        rid, req.model, created, "", finish_reason=item.finish_reason, tandem=tandem)
                    if req.stream_options and req.stream_options.include_usage:
                        u = usage(item.stats.prompt_tokens, item.stats.output_tokens)
                        yield chunk(delta={}, usage_=u) if chat else completion_chunk(rid, req.model, created, "", usage_=u)
                    break
                elif isinstance(item, EngineFailure):
                    self.stats.error(item.status)
                    yield sse(ApiError(item.status, item.message, type=item.type, code=item.code).body())
                    break
                try:
                    item = await asyncio.wait_for(stream.__anext__(), timeout=self.timeout_s)
                except StopAsyncIteration:
                    item = None
        except Exception as exc:  # engine died mid-stream: tell the client in-band, then end the stream
            self.stats.error(503)
            yield sse(ApiError(503, f"the {mode} engine failed mid-stream: {type(exc).__name__}", type="server_error", code="engine_unavailable").body())
        finally:
            self._returned(ticket, ok=finished)
            stream.cancel()  # a client that went away frees its scheduler slot at the engine's next step
        yield DONE

    # ---- outcome: stats, metrics, decision log ------------------------------------------------------

    def _tandem(self, decision, result: GenerationResult, mode: str, degraded: bool) -> dict:
        s = result.stats
        return {
            "mode": mode, "routed_mode": decision.mode, "task": decision.task, "reason": decision.reason, "rule": decision.rule,
            "policy_version": decision.policy_version, "canvas": decision.canvas if mode != "ar" else None,
            "steps": s.steps_per_canvas, "tokens_per_forward": round(s.tokens_per_forward, 3), "forwards": s.forwards,
            "drafted": s.drafted, "accepted_tokens": s.accepted, "degraded": degraded,
        }

    def _finish(self, result: GenerationResult, mode: str, degraded: bool, decision, route, started: float) -> None:
        latency_ms = (time.perf_counter() - started) * 1000
        s = result.stats
        self.stats.record(mode, latency_ms, s.tokens_per_forward, s.drafted, s.accepted, degraded)
        attrs = {"mode": mode, "task": decision.task}
        self.telemetry.requests.add(1, attrs | {"status": "ok"})
        self.telemetry.latency.record(latency_ms, {"mode": mode})
        self.telemetry.tokens_per_forward.record(s.tokens_per_forward, {"mode": mode})
        if s.drafted:
            self.telemetry.acceptance.record(s.acceptance_rate, {"mode": mode})
        if self.redis is not None and route is not None:
            outcome = {"mode": mode, "output_tokens": s.output_tokens, "finish_reason": result.finish_reason,
                       "latency_ms": round(latency_ms, 2), "tokens_per_forward": round(s.tokens_per_forward, 3),
                       "drafted": s.drafted, "accepted": s.accepted, "degraded": degraded}
            self._spawn(asyncio.to_thread(self._log_decision, route, decision, outcome))

    def _spawn(self, coroutine) -> None:
        """Fire-and-forget work off the request path, kept referenced until done."""
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _shadow_verify(self, gen: GenerationRequest, answer_ids: list[int]) -> None:
        """Check a block answer against the model's AR choice only to measure acceptance (the
        policy's shadow_verify_rate): one encoder pass over prompt + answer, as verified mode's
        commit pass would do; the client already has its answer."""
        if not answer_ids:
            return
        try:
            accepted = await asyncio.wait_for(self.engines["block"].agreement.remote(gen, answer_ids), timeout=self.timeout_s)
        except Exception:
            return
        self.stats.shadow(len(answer_ids), accepted)
        self.telemetry.acceptance.record(accepted / len(answer_ids), {"mode": "block", "shadow": True})

    def _log_decision(self, route, decision, outcome: dict) -> None:
        from router.decisions_log import log_decision, request_features

        if not log_decision(self.redis, request_features(route), decision.model_dump(mode="json"), outcome, stream=self.decisions_stream):
            self.telemetry.decisions_dropped.add(1)


@dataclasses.dataclass
class _Ticket:
    """A request at an engine, as the gateway's routing view counts it."""

    engine: str
    started: float  # time.monotonic() at dispatch
    estimate_ms: float | None = None  # the cost profile's finish estimate then (uncalibrated)
    backlog_end: float | None = None  # its place in the block engine's backlog


def _engine_span(tracer, span, result: GenerationResult) -> None:
    s = result.stats
    span.set_attributes({"tokens.output": s.output_tokens, "tokens.prompt": s.prompt_tokens, "forwards": s.forwards,
                         "tokens_per_forward": s.tokens_per_forward, "finish_reason": result.finish_reason})
    # The engine runs in another process; it reports when each canvas (block) or draft-and-verify
    # round (verified) ran, and those become spans with the engine's own timestamps.
    times = s.canvas_times_ns or [(None, None)] * len(s.steps_per_canvas)
    parent = span
    if s.drafted:
        parent = tracer.start_span("tandem.verify", context=trace.set_span_in_context(span), start_time=times[0][0] if times else None,
                                   attributes={"drafted": s.drafted, "accepted": s.accepted, "acceptance_rate": s.acceptance_rate})
    for i, (steps, (began, ended)) in enumerate(zip(s.steps_per_canvas, times)):
        child = tracer.start_span("tandem.canvas", context=trace.set_span_in_context(parent), start_time=began,
                                  attributes={"canvas.index": i, "canvas.steps": steps})
        child.end(end_time=ended)
    if parent is not span:
        parent.end(end_time=times[-1][1] if times else None)


class _policy_errors:
    """Turn policy store errors into OpenAI-style API errors with their status."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from policies.errors import PolicyError, PolicyValidationError

        if exc is None or not isinstance(exc, PolicyError):
            return False
        if isinstance(exc, PolicyValidationError):
            raise ApiError(400, exc.message, code=exc.code, param="policy", headers={}) from None
        raise ApiError(exc.status, redact(exc.message), type="invalid_request_error" if exc.status < 500 else "server_error", code=exc.code) from None


# ---- routes: thin functions over the replica's Gateway ---------------------------------------------
# Plain functions rather than class-based views: Ray Serve finds the Gateway instance through the
# replica context, which works with every FastAPI release (class-based views left `self` as a
# query parameter with FastAPI 0.165).


def _json_body_doc(model) -> dict:
    """`openapi_extra` documenting a raw-`Request` route's JSON body with `model`'s schema (inlined
    $defs), so /openapi.json shows the request and schema-driven tools can generate bodies."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    return {"requestBody": {"required": True, "content": {"application/json": {"schema": inline(schema)}}}}


def _gateway() -> Gateway:
    from ray import serve

    return serve.get_replica_context().servable_object


@api.get("/v1/models")
async def models(gw: Gateway = Depends(_gateway)):
    return await gw.models()


@api.get("/v1/models/{model_id}")
async def model(model_id: str, gw: Gateway = Depends(_gateway)):
    return await gw.model(model_id)


@api.post("/v1/chat/completions", openapi_extra=_json_body_doc(ChatCompletionRequest))
async def chat_completions(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.chat_completions(request)


@api.post("/v1/completions", openapi_extra=_json_body_doc(CompletionRequest))
async def completions(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.completions(request)


@api.get("/health")
async def health(gw: Gateway = Depends(_gateway)):
    return await gw.health()


@api.get("/ready")
async def ready(gw: Gateway = Depends(_gateway)):
    return await gw.ready()


@api.get("/admin/policy")
async def admin_policy(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_policy(request)


@api.post("/admin/policy/validate")
async def admin_validate(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_validate(request)


@api.post("/admin/policy")
async def admin_apply(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_apply(request)


@api.get("/admin/policy/history")
async def admin_history(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_history(request)


@api.post("/admin/policy/rollback")
async def admin_rollback(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_rollback(request)


@api.get("/admin/stats")
async def admin_stats(request: Request, gw: Gateway = Depends(_gateway)):
    return await gw.admin_stats(request)
