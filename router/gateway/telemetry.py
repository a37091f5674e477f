"""OpenTelemetry for the gateway: a span tree per request and metrics, exporter chosen by config.

Metrics are always served in Prometheus text format at `GET /metrics`, whatever the exporter: the
OpenTelemetry Prometheus exporter reads the same instruments into a registry private to the
gateway, and router.gateway.metrics_aggregate sums every replica's registry into what a scrape
answers. Their Prometheus names follow Prometheus' and vLLM's conventions (`Telemetry`). Exporters (`telemetry` argument of the app): `none` (spans and metrics are still
made, nothing else leaves the process), `console` (stdout), `file:PATH` (one JSON span per line, metrics every
second — what the tests read), `otlp` (OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT; needs the
`opentelemetry-exporter-otlp-proto-http` package). Providers are private to the gateway, not
the process-wide globals, so several apps in one process do not collide.

Span tree: `tandem.request` -> `tandem.route` (the decision as attributes) -> `tandem.engine`
(one per engine attempt: mode, tokens, forwards, acceptance) -> `tandem.canvas` children (one per
canvas, steps, timed by the engine replica), under a `tandem.verify` span (drafted, accepted) in
verified mode.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest

if TYPE_CHECKING:
    from router.decision.types import Decision
    from router.gateway.outcome import Outcome


def _exporters(kind: str):
    if kind == "none":
        return None, None
    if kind == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter()), PeriodicExportingMetricReader(ConsoleMetricExporter(), 10_000)
    if kind.startswith("file:"):
        out = open(kind[5:], "a", buffering=1)  # noqa: SIM115 - lives as long as the gateway
        spans = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
        metrics = ConsoleMetricExporter(out=out, formatter=lambda m: json.dumps({"metrics": json.loads(m.to_json(indent=None))}) + "\n")
        return SimpleSpanProcessor(spans), PeriodicExportingMetricReader(metrics, 1_000)
    if kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ValueError("telemetry 'otlp' needs `pip install opentelemetry-exporter-otlp-proto-http`") from exc
        return BatchSpanProcessor(OTLPSpanExporter()), PeriodicExportingMetricReader(OTLPMetricExporter(), 10_000)
    raise ValueError(f"telemetry must be none, console, otlp or file:PATH; got {kind!r}")


# Latency buckets (seconds), from a short AR answer to the longest wait anything may take: the
# proxy's end-to-end bound (serve_config.yaml http_options.request_timeout_s, 300 s); the app's
# request_timeout_s is added where it is not one of them (`latency_buckets`).
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0)
# Tokens per model call: 1 (AR) to a canvas's worth (DiffusionGemma reports 15-20).
TOKENS_PER_FORWARD_BUCKETS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0, 256.0)
RATIO_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
MODES = ("block", "verified", "ar")


def latency_buckets(request_timeout_s: float) -> tuple[float, ...]:
    """LATENCY_BUCKETS_S with the app's request deadline among them: a request that waited its full
    deadline lands in a bucket of its own, not only in +Inf."""
    return tuple(sorted(set(LATENCY_BUCKETS_S) | {float(request_timeout_s)}))


class Telemetry:
    """The gateway's tracer and instruments. Prometheus names (what the OpenTelemetry exporter makes
    of them) follow Prometheus' conventions: base units (`_seconds`), counters `_total` and present
    at 0 from the start for every label set known up front, 0-1 shares `_ratio`; the series that
    mean what vLLM's and Ray Serve LLM's mean carry their base names under `tandem_`
    (docs/operations.md maps each)."""

    def __init__(self, exporter: str = "none", service_name: str = "tandem-gateway", request_timeout_s: float = 120.0):
        resource = Resource.create({"service.name": service_name})
        span_processor, metric_reader = _exporters(exporter)
        self.tracer_provider = TracerProvider(resource=resource)
        if span_processor is not None:
            self.tracer_provider.add_span_processor(span_processor)
        self.registry = CollectorRegistry()  # this gateway's own: several apps in one process do not collide
        readers = [PrometheusMetricReader(disable_target_info=True, registry=self.registry)] + ([metric_reader] if metric_reader else [])
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self.tracer = self.tracer_provider.get_tracer("tandem.gateway")
        meter = self.meter_provider.get_meter("tandem.gateway")
        seconds = latency_buckets(request_timeout_s)
        # vLLM's and Ray Serve LLM's series, under Tandem's prefix
        self.e2e_latency = meter.create_histogram(
            "tandem.e2e_request_latency", unit="s", explicit_bucket_boundaries_advisory=seconds,
            description="End-to-end request latency by the mode that answered and the status (every outcome, errors included)")
        self.ttft = meter.create_histogram(
            "tandem.time_to_first_token", unit="s", explicit_bucket_boundaries_advisory=seconds,
            description="Time to the first content token by mode (the whole answer when not streamed)")
        self.inter_token_latency = meter.create_histogram(
            "tandem.inter_token_latency", unit="s", explicit_bucket_boundaries_advisory=seconds,
            description="Streamed answers: (last token - first token) / (output tokens - 1), one observation per request")
        self.prompt_tokens = meter.create_counter("tandem.prompt_tokens", description="Prompt tokens of answered requests, by mode")
        self.generation_tokens = meter.create_counter("tandem.generation_tokens", description="Output tokens of answered requests, by mode")
        self.draft_tokens = meter.create_counter("tandem.spec_decode_num_draft_tokens",
                                                 description="Verified mode: draft tokens put to the AR check")
        self.accepted_tokens = meter.create_counter("tandem.spec_decode_num_accepted_tokens",
                                                    description="Verified mode: draft tokens the AR check kept")
        # Tandem's own
        self.requests = meter.create_counter("tandem.requests", description="Requests by mode, task, route rule and status")
        self.degraded = meter.create_counter("tandem.degraded_requests",
                                             description="Requests answered by another mode than the routed one (its engine failed)")
        self.tokens_per_forward = meter.create_histogram(
            "tandem.tokens_per_forward", explicit_bucket_boundaries_advisory=TOKENS_PER_FORWARD_BUCKETS,
            description="Output tokens per model call")
        self.acceptance = meter.create_histogram(
            "tandem.draft_acceptance_ratio", explicit_bucket_boundaries_advisory=RATIO_BUCKETS,
            description="Verified: accepted / drafted per request (0 when every draft was dropped unverified); shadow-verified block answers")
        self.decisions_dropped = meter.create_counter("tandem.decisions_dropped", description="Decision log entries lost (Redis down)")
        for mode in MODES:  # present at 0 from the start (Prometheus' rate() needs the first sample)
            self.requests.add(0, {"mode": mode, "status": "200"})
            for counter in (self.prompt_tokens, self.generation_tokens, self.degraded):
                counter.add(0, {"mode": mode})
        for counter in (self.draft_tokens, self.accepted_tokens):
            counter.add(0, {"mode": "verified"})
        self.decisions_dropped.add(0)
        self._running: dict[str, float] = {}
        self._waiting: dict[str, float] = {}
        self._queue: dict[str, float] = {}
        self._state: dict[str, float] = {}  # policy version, Redis up
        meter.create_observable_gauge("tandem.num_requests_running", callbacks=[self._observe(self._running, "engine")],
                                      description="Requests (rows) decoding per engine")
        meter.create_observable_gauge("tandem.num_requests_waiting", callbacks=[self._observe(self._waiting, "engine")],
                                      description="Requests waiting for a batch slot per engine")
        meter.create_observable_gauge("tandem.queue_fill_ratio", callbacks=[self._observe(self._queue, "engine")],
                                      description="Waiting requests per engine as a share of its max_queue (1: the next one is a 429)")
        meter.create_observable_gauge("tandem.policy_version", callbacks=[self._observe_state("policy_version")], description="Version of the live policy")
        meter.create_observable_gauge("tandem.redis_up", callbacks=[self._observe_state("redis_up")],
                                      description="1 while the policy store reaches Redis (1 for a YAML store)")

    def set_queue_depth(self, depths: dict[str, float], running: dict[str, float] | None = None,
                        waiting: dict[str, float] | None = None) -> None:
        """Each engine's last polled load: its queue as a share of max_queue, rows decoding, requests waiting."""
        for values, new in ((self._queue, depths), (self._running, running), (self._waiting, waiting)):
            if new is not None:
                values.clear()
                values.update(new)

    def set_state(self, policy_version: int, redis_up: bool) -> None:
        self._state.update(policy_version=float(policy_version), redis_up=float(redis_up))

    def record(self, outcome: Outcome, decision: Decision, prompt_tokens: int = 0, first_token_at: float | None = None,
               finished_at: float | None = None) -> None:
        """The metrics of one answered request; a stream's `first_token_at` and `finished_at`
        (time.perf_counter()) give its inter-token latency (its time to first token was recorded as it came)."""
        mode = {"mode": outcome.mode}
        self.requests.add(1, mode | {"task": decision.task, "rule": decision.rule, "status": "200"})
        self.e2e_latency.record(outcome.latency_ms / 1000, mode | {"status": "200"})
        if not outcome.stream:  # a stream records its first token as it goes
            self.ttft.record(outcome.latency_ms / 1000, mode)
        elif first_token_at is not None and finished_at is not None and outcome.output_tokens > 1:
            self.inter_token_latency.record(max(0.0, finished_at - first_token_at) / (outcome.output_tokens - 1), mode)
        self.prompt_tokens.add(prompt_tokens, mode)
        self.generation_tokens.add(outcome.output_tokens, mode)
        self.degraded.add(int(outcome.degraded), mode)
        self.tokens_per_forward.record(outcome.tokens_per_forward, mode)
        if outcome.acceptance is not None:  # verified; 0 when every draft was dropped unverified (AR steps wrote the answer)
            self.acceptance.record(outcome.acceptance, mode)
            self.draft_tokens.add(outcome.drafted, mode)
            self.accepted_tokens.add(outcome.accepted, mode)

    def error(self, status: int, latency_s: float | None = None, mode: str | None = None, decision: Decision | None = None) -> None:
        """An answered error: counted with what is known of its route, and its latency with the status."""
        labels = ({"mode": mode} if mode else {}) | ({"task": decision.task, "rule": decision.rule} if decision is not None else {})
        self.requests.add(1, labels | {"status": str(status)})
        if latency_s is not None:
            self.e2e_latency.record(latency_s, ({"mode": mode} if mode else {}) | {"status": str(status)})

    @staticmethod
    def _observe(values: dict[str, float], label: str):
        from opentelemetry.metrics import Observation

        return lambda _options: [Observation(v, {label: k}) for k, v in values.items()]

    def _observe_state(self, key: str):
        from opentelemetry.metrics import Observation

        return lambda _options: [Observation(self._state[key])] if key in self._state else []

    def prometheus_text(self) -> bytes:
        """This gateway's own instruments, in Prometheus text exposition format (GET /metrics
        answers the aggregate over every Gateway replica: router.gateway.metrics_aggregate)."""
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


class GatewayStats:
    """What `/admin/stats` shows: requests, latency, tokens per forward and acceptance per mode."""

    def __init__(self, window: int = 1000):
        self._lock = threading.Lock()
        self.requests: dict[str, int] = defaultdict(int)
        self.errors: dict[str, int] = defaultdict(int)
        self.degraded = 0
        self._latency: dict[str, deque] = defaultdict(lambda: deque(maxlen=window))
        self._tpf: dict[str, deque] = defaultdict(lambda: deque(maxlen=window))
        self.drafted = 0
        self.accepted = 0
        self.shadow_drafted = 0  # shadow verification of block answers (policy shadow_verify_rate)
        self.shadow_accepted = 0

    def record(self, outcome: Outcome) -> None:
        with self._lock:
            self.requests[outcome.mode] += 1
            self._latency[outcome.mode].append(outcome.latency_ms)
            self._tpf[outcome.mode].append(outcome.tokens_per_forward)
            self.drafted += outcome.drafted
            self.accepted += outcome.accepted
            self.degraded += int(outcome.degraded)

    def shadow(self, drafted: int, accepted: int) -> None:
        with self._lock:
            self.shadow_drafted += drafted
            self.shadow_accepted += accepted

    def error(self, status: int) -> None:
        with self._lock:
            self.errors[str(status)] += 1

    def snapshot(self) -> dict:
        def pct(values, q):
            s = sorted(values)
            return round(s[min(len(s) - 1, int(q * len(s)))], 2) if s else None

        with self._lock:
            modes = {
                m: {
                    "requests": n,
                    "latency_ms_p50": pct(self._latency[m], 0.5),
                    "latency_ms_p99": pct(self._latency[m], 0.99),
                    "tokens_per_forward_mean": round(sum(self._tpf[m]) / len(self._tpf[m]), 3) if self._tpf[m] else None,
                }
                for m, n in self.requests.items()
            }
            return {
                "modes": modes,
                "errors": dict(self.errors),
                "degraded": self.degraded,
                "acceptance_rate": round(self.accepted / self.drafted, 4) if self.drafted else None,
                "shadow_acceptance_rate": round(self.shadow_accepted / self.shadow_drafted, 4) if self.shadow_drafted else None,
            }


def engine_span(tracer, span, result) -> None:
    """Attributes of an engine attempt's span, and its canvas (block) or round (verified) children."""
    s = result.stats
    span.set_attributes({"tokens.output": s.output_tokens, "tokens.prompt": s.prompt_tokens, "forwards": s.forwards,
                         "tokens_per_forward": s.tokens_per_forward, "tokens.looked_up": s.looked_up, "finish_reason": result.finish_reason})
    # The engine runs in another process; it reports when each canvas (block) or draft-and-verify
    # round (verified) ran, and those become spans with the engine's own timestamps.
    times = s.canvas_times_ns or [(None, None)] * len(s.steps_per_canvas)
    parent = span
    if result.mode == "verified":  # even when every draft was dropped unverified and AR steps wrote the answer
        parent = tracer.start_span("tandem.verify", context=trace.set_span_in_context(span), start_time=times[0][0] if times else None,
                                   attributes={"drafted": s.drafted, "accepted": s.accepted, "acceptance_rate": s.acceptance_rate,
                                               "ar_tokens": s.ar_tokens})
    for i, (steps, (began, ended)) in enumerate(zip(s.steps_per_canvas, times)):
        child = tracer.start_span("tandem.canvas", context=trace.set_span_in_context(parent), start_time=began,
                                  attributes={"canvas.index": i, "canvas.steps": steps})
        child.end(end_time=ended)
    if parent is not span:
        parent.end(end_time=times[-1][1] if times else None)
