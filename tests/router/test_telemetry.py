"""The gateway's telemetry (router.gateway.telemetry): /admin/stats' numbers per mode, the Prometheus
text of the metrics, the exporters by name, and an engine attempt's span with a child per canvas
(under a verify span in verified mode). Real OpenTelemetry providers, spans kept in memory."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from engines.types import DecodeStats, GenerationResult
from router.decision.types import Decision
from router.gateway.outcome import Outcome
from router.gateway.telemetry import GatewayStats, Telemetry, engine_span


def outcome(mode: str = "ar", latency_ms: float = 10.0, drafted: int = 0, accepted: int = 0, degraded: bool = False) -> Outcome:
    return Outcome(mode=mode, degraded=degraded, stream=False, latency_ms=latency_ms, estimate_ms=None, output_tokens=8,
                   finish_reason="stop", tokens_per_forward=2.0, drafted=drafted, accepted=accepted,
                   acceptance=accepted / drafted if drafted else None, ar_tokens=0, looked_up=0)


def decision(mode: str = "ar") -> Decision:
    return Decision(mode=mode, canvas=None, steps=None, reason="test", rule="task_default", task="extract", predicted_tokens=8,
                    confidence=0.9, policy_version=4)


def test_stats_keep_latency_percentiles_and_rates_per_mode():
    stats = GatewayStats(window=100)
    for ms in range(1, 101):
        stats.record(outcome("ar", latency_ms=float(ms)))
    stats.record(outcome("verified", drafted=10, accepted=6, degraded=True))
    stats.shadow(drafted=4, accepted=1)
    stats.error(503)
    stats.error(503)
    snap = stats.snapshot()
    assert snap["modes"]["ar"] == {"requests": 100, "latency_ms_p50": 51.0, "latency_ms_p99": 100.0, "tokens_per_forward_mean": 2.0}
    assert snap["modes"]["verified"]["requests"] == 1 and snap["degraded"] == 1 and snap["errors"] == {"503": 2}
    assert snap["acceptance_rate"] == 0.6 and snap["shadow_acceptance_rate"] == 0.25
    assert GatewayStats().snapshot() == {"modes": {}, "errors": {}, "degraded": 0, "acceptance_rate": None, "shadow_acceptance_rate": None}


def test_the_metrics_read_as_prometheus_text():
    t = Telemetry("none")
    try:
        t.record(outcome("ar"), decision("ar"))
        t.set_queue_depth({"block": 0.5}, running={"block": 3.0}, waiting={"block": 2.0})
        t.set_state(policy_version=4, redis_up=True)
        samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if not k.startswith("otel_")))): s.value
                   for family in text_string_to_metric_families(t.prometheus_text().decode()) for s in family.samples}
    finally:
        t.shutdown()
    requests = [v for (name, labels), v in samples.items() if name == "tandem_requests_total" and ("mode", "ar") in labels]
    assert sorted(requests) == [0.0, 1.0]  # the series present from the start, and the routed one
    assert samples[("tandem_queue_fill_ratio", (("engine", "block"),))] == 0.5
    assert samples[("tandem_num_requests_running", (("engine", "block"),))] == 3.0
    assert samples[("tandem_policy_version", ())] == 4.0 and samples[("tandem_redis_up", ())] == 1.0
    assert samples[("tandem_num_requests_waiting", (("engine", "block"),))] == 2.0


def test_an_unknown_exporter_is_refused_naming_the_valid_ones_and_a_file_gets_one_span_a_line(tmp_path):
    with pytest.raises(ValueError, match="none, console, otlp or file:PATH"):
        Telemetry("jaeger")
    path = tmp_path / "spans.jsonl"
    t = Telemetry(f"file:{path}")
    t.tracer.start_span("tandem.request").end()
    t.shutdown()
    (line,) = [json.loads(x) for x in path.read_text().splitlines() if '"name"' in x and "metrics" not in x]
    assert line["name"] == "tandem.request"


@pytest.mark.parametrize("mode", ["block", "verified"])
def test_an_engine_span_has_a_child_per_canvas_timed_by_the_engine(mode):
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("test")
    stats = DecodeStats(prompt_tokens=5, output_tokens=12, encoder_calls=3, decoder_calls=6, steps_per_canvas=[4, 2],
                        canvas_times_ns=[(1_000, 2_000), (2_000, 3_500)], drafted=12, accepted=9)
    result = GenerationResult(request_id="r", mode=mode, text="x", token_ids=list(range(12)), finish_reason="stop", stats=stats)
    engine = tracer.start_span("tandem.engine")
    engine_span(tracer, engine, result)
    engine.end()
    by_name = {}
    for s in spans.get_finished_spans():
        by_name.setdefault(s.name, []).append(s)
    canvases = by_name["tandem.canvas"]
    assert [(c.attributes["canvas.index"], c.attributes["canvas.steps"], c.start_time, c.end_time) for c in canvases] == [
        (0, 4, 1_000, 2_000), (1, 2, 2_000, 3_500)]
    assert engine.attributes["tokens.output"] == 12 and engine.attributes["forwards"] == 9
    if mode == "verified":
        (verify,) = by_name["tandem.verify"]
        assert verify.attributes["accepted"] == 9 and all(c.parent.span_id == verify.context.span_id for c in canvases)
        assert (verify.start_time, verify.end_time) == (1_000, 3_500)
    else:
        assert "tandem.verify" not in by_name and all(c.parent.span_id == engine.context.span_id for c in canvases)
