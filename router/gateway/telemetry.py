"""OpenTelemetry for the gateway: a span tree per request and metrics, exporter chosen by config.

Metrics are always served in Prometheus text format at `GET /metrics` (the OpenTelemetry
Prometheus exporter reading the same instruments, into a registry private to the gateway), whatever
the exporter. Exporters (`telemetry` argument of the app): `none` (spans and metrics are still
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


class Telemetry:
    def __init__(self, exporter: str = "none", service_name: str = "tandem-gateway"):
        resource = Resource.create({"service.name": service_name})
        span_processor, metric_reader = _exporters(exporter)
        self.tracer_provider = TracerProvider(resource=resource)
        if span_processor is not None:
            self.tracer_provider.add_span_processor(span_processor)
        self.registry = CollectorRegistry()  # this gateway's own: several apps in one process do not collide
        readers = [PrometheusMetricReader(registry=self.registry)] + ([metric_reader] if metric_reader else [])
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self.tracer = self.tracer_provider.get_tracer("tandem.gateway")
        meter = self.meter_provider.get_meter("tandem.gateway")
        self.requests = meter.create_counter("tandem.requests", description="Requests by mode, task, route rule and status")
        self.latency = meter.create_histogram("tandem.latency", unit="ms", description="End-to-end latency by mode")
        self.ttft = meter.create_histogram("tandem.time_to_first_token", unit="ms",
                                           description="Time to the first content token by mode (the whole answer when not streamed)")
        self.tokens_per_forward = meter.create_histogram("tandem.tokens_per_forward", description="Output tokens per model call")
        self.acceptance = meter.create_histogram("tandem.acceptance_rate", description="Verified mode: accepted / drafted (0 when every draft was dropped unverified)")
        self.decisions_dropped = meter.create_counter("tandem.decisions_dropped", description="Decision log entries lost (Redis down)")
        self._queue: dict[str, float] = {}
        self._running: dict[str, float] = {}
        self._state: dict[str, float] = {}  # policy version, Redis up
        meter.create_observable_gauge("tandem.queue_depth", callbacks=[self._observe(self._queue, "engine")],
                                      description="Waiting requests per engine, as a share of its max_queue")
        meter.create_observable_gauge("tandem.running_rows", callbacks=[self._observe(self._running, "engine")], description="Rows decoding per engine")
        meter.create_observable_gauge("tandem.policy_version", callbacks=[self._observe_state("policy_version")], description="Version of the live policy")
        meter.create_observable_gauge("tandem.redis_up", callbacks=[self._observe_state("redis_up")],
                                      description="1 while the policy store reaches Redis (1 for a YAML store)")

    def set_queue_depth(self, depths: dict[str, float], running: dict[str, float] | None = None) -> None:
        self._queue.clear()
        self._queue.update(depths)
        if running is not None:
            self._running.clear()
            self._running.update(running)

    def set_state(self, policy_version: int, redis_up: bool) -> None:
        self._state.update(policy_version=float(policy_version), redis_up=float(redis_up))

    def record(self, outcome: Outcome, decision: Decision) -> None:
        """The metrics of one answered request."""
        mode = {"mode": outcome.mode}
        self.requests.add(1, mode | {"task": decision.task, "rule": decision.rule, "status": "200"})
        self.latency.record(outcome.latency_ms, mode)
        if not outcome.stream:  # a stream records its first token as it goes
            self.ttft.record(outcome.latency_ms, mode)
        self.tokens_per_forward.record(outcome.tokens_per_forward, mode)
        if outcome.acceptance is not None:  # verified; 0 when every draft was dropped unverified (AR steps wrote the answer)
            self.acceptance.record(outcome.acceptance, mode)

    @staticmethod
    def _observe(values: dict[str, float], label: str):
        from opentelemetry.metrics import Observation

        return lambda _options: [Observation(v, {label: k}) for k, v in values.items()]

    def _observe_state(self, key: str):
        from opentelemetry.metrics import Observation

        return lambda _options: [Observation(self._state[key])] if key in self._state else []

    def prometheus_text(self) -> bytes:
        """Every instrument, in Prometheus text exposition format (what GET /metrics answers)."""
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
