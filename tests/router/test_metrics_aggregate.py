"""The metrics' names and units by Prometheus' conventions (router.gateway.telemetry), and the
aggregate over Gateway replicas that GET /metrics answers (router.gateway.metrics_aggregate): real
OpenTelemetry instruments and Prometheus registries, two Telemetry objects standing for two
replicas, the aggregate's class called directly (its Ray actor and the HTTP scrape are
tests/hardening/test_metrics_across_replicas.py's)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from engines.types import MODES
from router.decision.types import Decision
from router.gateway.metrics_aggregate import MetricsAggregate, families_of, merge, render
from router.gateway.outcome import Outcome
from router.gateway.telemetry import Telemetry


def outcome(mode: str = "verified", latency_ms: float = 250.0, stream: bool = False, degraded: bool = False) -> Outcome:
    return Outcome(mode=mode, degraded=degraded, stream=stream, latency_ms=latency_ms, estimate_ms=None, output_tokens=9,
                   finish_reason="stop", tokens_per_forward=3.0, drafted=10 if mode == "verified" else 0,
                   accepted=7 if mode == "verified" else 0, acceptance=0.7 if mode == "verified" else None, ar_tokens=0, looked_up=0)


def decision(mode: str = "verified") -> Decision:
    return Decision(mode=mode, canvas=None, steps=None, reason="test", rule="task_default", task="extract", predicted_tokens=8,
                    confidence=0.9, policy_version=4)


def families(text: bytes | str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text.decode() if isinstance(text, bytes) else text)}


def value(fams: dict, family: str, sample: str, **labels: str) -> float:
    return sum(s.value for s in fams[family].samples if s.name == sample and labels.items() <= s.labels.items())


def test_names_and_units_follow_prometheus_conventions():
    t = Telemetry("none", request_timeout_s=120.0)
    try:
        fresh = families(t.prometheus_text())
        t.record(outcome("verified"), decision(), prompt_tokens=20, first_token_at=1.0, finished_at=1.8)
        t.record(outcome("ar", stream=True), decision("ar"), prompt_tokens=20, first_token_at=1.0, finished_at=1.8)
        t.acceptance.record(0.5, {"mode": "block", "shadow": True})
        t.error(503, latency_s=8.0, mode="ar", decision=decision("ar"))
        t.error(400, latency_s=0.01)
        t.set_queue_depth({"block": 0.25}, running={"block": 1}, waiting={"block": 16})
        t.set_state(4, True)
        fams = families(t.prometheus_text())
    finally:
        t.shutdown()
    series = {s.name for f in fams.values() for s in f.samples}
    assert not [n for n in series if "milli" in n], "a series in milliseconds"
    # every counter is present at 0 before the first request, for each mode where it has one
    for counter in ("tandem_requests", "tandem_prompt_tokens", "tandem_generation_tokens", "tandem_degraded_requests"):
        assert fresh[counter].type == "counter" and {s.labels["mode"] for s in fresh[counter].samples} == set(MODES)
        assert all(s.value == 0 and s.name == f"{counter}_total" for s in fresh[counter].samples)
    for counter in ("tandem_decisions_dropped", "tandem_spec_decode_num_draft_tokens", "tandem_spec_decode_num_accepted_tokens"):
        assert [s.value for s in fresh[counter].samples] == [0.0]
    # the shares: named _ratio, and nothing named as a rate or depth any more
    assert {n for n in fams if n.endswith("_ratio")} == {"tandem_draft_acceptance_ratio", "tandem_queue_fill_ratio"}
    assert not [n for n in series if n.endswith(("_rate", "_depth")) or "_rate_" in n or "_depth_" in n]
    # vLLM's / Ray Serve LLM's base names, in seconds, with buckets up to the proxy's 300 s bound
    for name in ("tandem_e2e_request_latency_seconds", "tandem_time_to_first_token_seconds", "tandem_inter_token_latency_seconds"):
        assert fams[name].type == "histogram"
        bounds = [float(s.labels["le"]) for s in fams[name].samples if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]
        assert 120.0 in bounds and max(bounds) == 300.0 and min(bounds) <= 0.01
    assert value(fams, "tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_sum", mode="verified", status="200") == 0.25
    # latency for every outcome, with the status: a 503 after 8 s, a 400 refused before routing
    assert value(fams, "tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", mode="ar", status="503") == 1
    assert value(fams, "tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_bucket", status="503", le="5.0") == 0
    assert value(fams, "tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", status="400") == 1
    assert value(fams, "tandem_requests", "tandem_requests_total", mode="ar", status="503", rule="task_default") == 1
    # a stream's inter-token latency: 0.8 s over 8 gaps
    assert abs(value(fams, "tandem_inter_token_latency_seconds", "tandem_inter_token_latency_seconds_sum", mode="ar") - 0.1) < 1e-9
    assert value(fams, "tandem_generation_tokens", "tandem_generation_tokens_total", mode="verified") == 9
    assert value(fams, "tandem_prompt_tokens", "tandem_prompt_tokens_total", mode="ar") == 20
    assert value(fams, "tandem_spec_decode_num_accepted_tokens", "tandem_spec_decode_num_accepted_tokens_total") == 7
    assert value(fams, "tandem_num_requests_waiting", "tandem_num_requests_waiting", engine="block") == 16


def replica_families(*outcomes: Outcome, version: int = 4, running: float = 0.0) -> list:
    t = Telemetry("none")
    try:
        for o in outcomes:
            t.record(o, decision(o.mode), prompt_tokens=10)
        t.set_queue_depth({"block": 0.0}, running={"block": running}, waiting={"block": 0})
        t.set_state(version, True)
        return families_of(t.registry)
    finally:
        t.shutdown()


def test_the_aggregate_sums_counters_over_replicas_and_keeps_a_gone_replicas_total():
    a = replica_families(outcome("ar"), outcome("ar"), version=4, running=1.0)
    b = replica_families(outcome("ar"), outcome("block"), version=5, running=3.0)
    both = families(render(merge({"replica-a": (100.0, a), "replica-b": (100.0, b)}, now=101.0)))
    assert value(both, "tandem_requests", "tandem_requests_total", mode="ar", status="200") == 3
    assert value(both, "tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", mode="ar") == 3
    assert value(both, "tandem_prompt_tokens", "tandem_prompt_tokens_total") == 40
    # a replica's own state: one series each, labelled by replica; the engines' load: the largest view
    versions = {s.labels["replica"]: s.value for s in both["tandem_policy_version"].samples}
    assert versions == {"replica-a": 4.0, "replica-b": 5.0}
    assert value(both, "tandem_num_requests_running", "tandem_num_requests_running", engine="block") == 3.0
    assert not [s for f in both.values() for s in f.samples if any(k.startswith("otel_") for k in s.labels)]
    # replica b not heard from for longer than LIVE_S: its gauges leave, its counts stay in the totals
    later = families(render(merge({"replica-a": (200.0, a), "replica-b": (100.0, b)}, now=201.0)))
    assert value(later, "tandem_requests", "tandem_requests_total", mode="ar", status="200") == 3
    assert {s.labels["replica"] for s in later["tandem_policy_version"].samples} == {"replica-a"}
    assert value(later, "tandem_num_requests_running", "tandem_num_requests_running", engine="block") == 1.0


def test_the_aggregate_answers_the_same_text_until_something_changes_and_ignores_a_late_publication():
    aggregate = MetricsAggregate()
    first = replica_families(outcome("ar"))
    second = replica_families(outcome("ar"), outcome("ar"))
    aggregate.publish("replica-a", 2, second)
    aggregate.publish("replica-b", 1, first)
    texts = {aggregate.text() for _ in range(20)}
    assert len(texts) == 1
    aggregate.publish("replica-a", 1, first)  # an older publication of replica a arriving late: its counters are lower
    assert aggregate.text() in texts
    assert value(families(aggregate.text()), "tandem_requests", "tandem_requests_total", mode="ar", status="200") == 3
    aggregate.publish("replica-b", 2, second)
    assert value(families(aggregate.text()), "tandem_requests", "tandem_requests_total", mode="ar", status="200") == 4


def test_a_series_keeps_its_labels_when_a_later_request_sets_more_of_them():
    """The exporter pads every series of a family with the labels of its widest, empty where unset:
    the aggregate drops empty labels, so the zero series present from the start is the same series after."""
    aggregate = MetricsAggregate()
    aggregate.publish("replica-a", 1, replica_families())
    fresh = {(s.name, tuple(sorted(s.labels.items()))) for f in families(aggregate.text()).values() for s in f.samples}
    aggregate.publish("replica-a", 2, replica_families(outcome("ar")))
    later = {(s.name, tuple(sorted(s.labels.items()))) for f in families(aggregate.text()).values() for s in f.samples}
    assert ("tandem_requests_total", (("mode", "block"), ("status", "200"))) in fresh
    assert fresh <= later, f"series gone: {sorted(fresh - later)[:3]}"
