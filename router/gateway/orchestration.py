"""The Gateway: orchestration of one request, from a validated OpenAI body to its response.

`serve()`: route (`Router.decide`: learned prediction + live policy + the routing view) -> the
engine deployment for the decided mode (by the app's layout, `router.decision.layouts`: split,
`BlockEngine` for block and verified and `AREngine` for AR; or shared, one `SharedEngine` for all)
through one failover loop (`router.gateway.failover`: waits bounded by the request's deadline and the
engines' health; on a failure once more in the policy's `on_engine_failure` mode, else the
error) -> the reply (`router.gateway.replies`): a typed answer or stream of parts
(`router.gateway.answer_parts`), with the decision in headers and in a `tandem` object, which
`serve()` renders as OpenAI's response or SSE chunks (`router.gateway.answers`) and the Responses
route as its own (`router.gateway.responses_events`) -> the records (`router.gateway.records`):
stats, metrics, the feed, and off the request path shadow verification and the decisions log.

Streamed and whole responses share that path. An answer with tools or a JSON response_format is
decoded under its grammar (`router.gateway.structured`), so it parses whether it is streamed or not.

The HTTP layer is `router.gateway.ingress` (routes, errors) and `router.gateway.admin` (the admin API); this
class is plain, so tests can build one with small real parts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from fastapi.responses import JSONResponse, StreamingResponse
from engines.errors import EngineUnavailableError, ServiceUnavailableError, TandemError
from engines.prompt_bounds import check_chars
from router.gateway.answer_parts import Reply
from router.gateway.answers import new_id, stream_chunks, whole_answer
from router.gateway.calls import Call, client_timeout
from router.gateway.decision_feed import DecisionFeed
from router.decision.layouts import SHARED, SPLIT
from router.decision.engine_client import engine_client, engine_infos
from router.gateway.failover import Failover
from router.gateway.metrics_aggregate import replica_metrics
from router.gateway.records import Records
from router.gateway.replica_logs import to_replica_log
from router.gateway.replies import Replies
from router.decision.routing_view import POLL_INTERVAL_S, PROBE_TIMEOUT_S, RoutingView

log = logging.getLogger("tandem.gateway")

MAX_BODY_BYTES = 4 * 1024 * 1024
READY_TIMEOUT_S = 5.0  # how long GET /ready waits for every engine's info()


def replica_gateway() -> "Gateway":
    """The Gateway of this Ray Serve replica: the routes' dependency (tests override it)."""
    from ray import serve

    return serve.get_replica_context().servable_object


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
        probe_interval_s: float = POLL_INTERVAL_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        decisions_log: dict | None = None,
        responses_ttl_s: int = 24 * 3600,  # router.gateway.responses_store.DEFAULT_TTL_S (the app passes it)
        client_timeouts: bool = False,  # honour a client's shorter deadline (x-tandem-timeout-s): router.app.AppArgs
        shared_engine=None,  # the shared layout's one engine (then block_engine and ar_engine are None)
    ):
        from policies.stores import store_kind
        from router.decision.decide import Router
        from router.gateway.decisions_log import DecisionsLogSettings
        from router.gateway.telemetry import GatewayStats, Telemetry

        to_replica_log()  # Tandem's INFO lines (router.gateway.replica_logs) beside Serve's, in the replica's log
        self.layout = SHARED if shared_engine is not None else SPLIT
        engines = {"shared": shared_engine} if shared_engine is not None else {"block": block_engine, "ar": ar_engine}
        self.engines = {name: engine_client(e) for name, e in engines.items()}  # router.decision.engine_client.EngineClient
        source = policy_source or os.environ.get("TANDEM_POLICY_SOURCE")
        store_kwargs = {"prefix": key_prefix} if source and store_kind(source) == "redis" else {}
        self.redis = None
        redis_url = redis_url or (source if source and store_kind(source) == "redis" else None)  # the log follows the policy store
        if redis_url:
            from policies.stores.base import redis_client

            self.redis = redis_client(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.key_prefix = key_prefix
        self.decisions_stream = f"{key_prefix}decisions"
        self.decisions_log = DecisionsLogSettings.model_validate(decisions_log or {})  # default: no prompt text, 7 days, 64 MiB
        self.responses_ttl_s = responses_ttl_s  # how long the Responses API keeps a conversation (router.gateway.responses_store); 0: none
        self.admin_token = os.environ.get(admin_token_env) or None
        self.telemetry = Telemetry(telemetry, request_timeout_s=request_timeout_s)
        self.metrics = replica_metrics(self.telemetry.registry, self._metric_state)  # None outside a Serve replica
        self.stats = GatewayStats()
        self.feed = DecisionFeed()  # the console's live view of decisions and outcomes
        self.view = RoutingView(self.engines, self.telemetry, poll_interval_s=probe_interval_s, probe_timeout_s=probe_timeout_s,
                                layout=self.layout)
        # the router prices modes (cost-aware routing) with the profile the view fetches from the engines
        self.router = Router(model_path=router_model, policy_source=source, costs=self.view, **store_kwargs)
        self.timeout_s, self.client_timeouts = request_timeout_s, client_timeouts
        self.records = Records(self.stats, self.feed, self.telemetry, self.redis, self.decisions_log, self.decisions_stream,
                               shadow_engine=self.engines.get(self.layout.engine("block")), timeout_s=request_timeout_s)
        self.failover = Failover(self.engines, self.view, self.telemetry, request_timeout_s, on_error=self.records.error)
        self.replies = Replies(self.view, self.telemetry, self.records)
        self.max_body_bytes = max_body_bytes

    # ---- the small routes -----------------------------------------------------------------------------

    async def ready(self) -> dict:
        self.view.start()  # the routing view (cost profile, queues) starts filling before traffic does
        try:
            infos = await engine_infos(self.engines, timeout_s=READY_TIMEOUT_S)
        except Exception as exc:
            raise EngineUnavailableError(f"engines not ready: {type(exc).__name__}", code="not_ready") from None
        return {"status": "ready", "engines": {n: dataclasses.asdict(i) for n, i in zip(self.engines, infos)},
                "policy_version": self.router.policy.version}

    # ---- one request ------------------------------------------------------------------------------------

    async def serve(self, call: Call, headers: dict[str, str]):
        """Route `call`, run it, answer it in OpenAI's format (JSONResponse or StreamingResponse). Raises TandemError."""
        reply = await self.answer(call, headers)
        if call.stream:
            return StreamingResponse(stream_chunks(call, reply.parts), media_type="text/event-stream", headers=reply.headers)
        return JSONResponse(whole_answer(call, reply.answer), headers=reply.headers)

    async def answer(self, call: Call, headers: dict[str, str]) -> Reply:
        """Route `call`, run it: its typed answer, or its stream's parts (`call.stream`). Raises TandemError."""
        started = time.perf_counter()
        await self.view.ready()
        try:
            self._check_length(call)
            timeout_s = self._timeout(headers)
        except TandemError as exc:  # refused before routing: counted, with no decision
            self.records.error(exc.status, code=exc.code, started=started)
            raise
        call.request_id = headers.get("x-request-id") or new_id("chatcmpl" if call.chat else "cmpl")
        call.route = call.route.model_copy(update={"request_id": call.request_id})  # the shadow-verification draw
        tracer = self.telemetry.tracer
        with tracer.start_as_current_span("tandem.request", attributes={"request.id": call.request_id, "request.model": call.model,
                                                                       "request.stream": call.stream}) as root:
            with tracer.start_as_current_span("tandem.route") as route_span:
                try:
                    decision = self.router.decide(call.route, self.view.view())
                except TandemError as exc:
                    self.records.error(exc.status, code=exc.code, started=started)
                    raise
                route_span.set_attributes({f"decision.{k}": v for k, v in decision.model_dump().items() if v is not None and not isinstance(v, dict)})
            root.set_attribute("tandem.mode", decision.mode)
            limit = self.view.canvas_limit
            gen = dataclasses.replace(
                call.gen, mode=decision.mode, request_id=call.request_id,
                canvas=min(decision.canvas, limit) if decision.canvas and limit else decision.canvas, max_denoising_steps=decision.steps,
                # the length the engine drafts for and failover prices: the router's p90 under the
                # request's cap (calls.py fills the cap's default; routing reads only the client's own)
                expected_tokens=max(1, min(decision.predicted_tokens, call.gen.max_new_tokens)),
            )
            attempt = await self.failover.attempt(gen, decision, stream=call.stream, started=started, timeout_s=timeout_s)
            out_headers = decision.headers() | attempt.headers()  # Ray Serve's proxy adds x-request-id (the id in the body)
            if call.stream:
                return Reply(out_headers, parts=self.replies.parts(call, attempt))
            return Reply(out_headers, answer=await self.replies.whole(call, attempt))

    def _check_length(self, call: Call) -> None:
        """Refuse a prompt that certainly cannot fit the engines' context by its length alone, before
        routing reads it or an engine gets it (engines.prompt_bounds: no tokenizer, a 400 in ms)."""
        if (limit := self.view.prompt_limit) is not None:  # no engine info yet: the engine refuses it as cheaply
            check_chars(call.gen.messages, call.gen.prompt, call.gen.max_new_tokens, limit)

    def _timeout(self, headers: dict[str, str]) -> float:
        """This request's deadline: request_timeout_s, or the client's shorter `x-tandem-timeout-s`
        where the app honours it (client_timeouts); a longer one changes nothing."""
        asked = client_timeout(headers) if self.client_timeouts else None
        return self.timeout_s if asked is None else min(asked, self.timeout_s)

    def _metric_state(self) -> None:
        """The live policy's state into the gauges, read before each publication or scrape."""
        store = self.router.store.status()
        self.telemetry.set_state(self.router.policy.version, bool(store.get("healthy", True)))

    async def metrics_text(self) -> bytes:
        """GET /metrics: every instrument in Prometheus text format, the aggregate over every Gateway
        replica of this application (router.gateway.metrics_aggregate); this Gateway's own outside a
        Serve replica. Raises ServiceUnavailableError when the aggregate does not answer."""
        if self.metrics is None:
            self._metric_state()
            return self.telemetry.prometheus_text()
        try:
            return await self.metrics.text()
        except Exception as exc:  # a replica's own numbers would read as a counter reset: no answer instead
            raise ServiceUnavailableError(f"the metrics aggregate did not answer: {type(exc).__name__}", code="metrics_unavailable") from None
