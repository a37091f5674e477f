"""`GET /metrics` as one series whichever Gateway replica answers: an aggregate over the replicas.

Each Gateway replica keeps its own instruments (router.gateway.telemetry), and Ray Serve's proxy
sends each scrape to any replica: read alone, a replica's registry makes sums drop whenever the
other one answers, and Prometheus reads every drop as a counter reset. So every replica publishes
its cumulative samples (`ReplicaMetrics`: once a second, and again just before it answers a
scrape) to one named Ray actor per application (`MetricsAggregate`), and every scrape answers the
actor's merge:

- counters and histograms: the sum over every replica ever heard from. A replica that died keeps
  its last published samples in the sum (at most a second of its traffic is lost), so a total never
  goes down when a replica goes away or is replaced;
- gauges the replicas each observe of the engines (running, waiting, queue share): the largest
  over live replicas (heard from in the last `LIVE_S`);
- gauges of a replica's own state (policy version, Redis up): one series per live replica,
  labelled `replica` as Ray Serve labels its own `ray_serve_*` series, so that replicas serving
  different policy versions show.

The actor is detached (a Gateway replica that dies does not take it along) and named after the
application, so two applications in one cluster keep apart; with no traffic the merge is the same
on every scrape. Outside a Serve replica (in-process tests) a Gateway answers its own registry.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

log = logging.getLogger("tandem.gateway")

PUBLISH_INTERVAL_S = 1.0  # how stale another replica's samples may be in a scrape
LIVE_S = 10.0  # a replica not heard from for this long is gone: its gauges leave the scrape (its counters stay)
SCRAPE_TIMEOUT_S = 5.0  # a scrape that cannot reach the aggregate is a 503, never one replica's own numbers
REPLICA_GAUGES = frozenset({"tandem_policy_version", "tandem_redis_up"})  # a replica's own state: one series per replica
NAMESPACE = "tandem"

# One family as published: (name, documentation, type, unit, samples), each sample (name, labels, value)
# with labels as sorted (key, value) pairs; the OpenTelemetry exporter's otel_scope_* labels are dropped
# (the same on every series, noise in every query), and so are empty ones: the exporter gives every
# series of a family the labels of its widest one, empty where unset, so a series' label set would
# change with the first request that sets more of them (Prometheus reads an empty label as absent).
Family = tuple[str, str, str, str, list[tuple[str, tuple[tuple[str, str], ...], float]]]


def families_of(registry: CollectorRegistry) -> list[Family]:
    """A registry's samples now, as plain data a Ray call can carry."""
    out = []
    for metric in registry.collect():
        samples = [(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if v != "" and not k.startswith("otel_scope_"))), s.value)
                   for s in metric.samples]
        out.append((metric.name, metric.documentation, metric.type, metric.unit, samples))
    return out


def merge(published: dict[str, tuple[float, list[Family]]], now: float, live_s: float = LIVE_S) -> list[Family]:
    """The aggregate of every replica's last published families (`published`: replica id ->
    (when it was last heard from, its families)); see the module docstring for the rules. The
    order is deterministic: families by name, series by labels, a histogram's samples as published."""
    merged: dict[str, tuple[str, str, str, dict]] = {}
    for replica in sorted(published):
        heard, families = published[replica]
        live = now - heard <= live_s
        for name, doc, kind, unit, samples in families:
            if kind == "gauge" and not live:
                continue
            _, _, _, series = merged.setdefault(name, (doc, kind, unit, {}))
            for sample_name, labels, value in samples:
                if kind == "gauge" and name in REPLICA_GAUGES:
                    labels = tuple(sorted((*labels, ("replica", replica))))
                group = tuple(kv for kv in labels if kv[0] != "le")  # a histogram's series: its labels without le
                values = series.setdefault(group, {})
                key = (sample_name, labels)
                if kind == "gauge":
                    values[key] = max(values.get(key, value), value)
                else:
                    values[key] = values.get(key, 0.0) + value
    return [(name, doc, kind, unit, [(s, labels, v) for group in sorted(series) for (s, labels), v in series[group].items()])
            for name, (doc, kind, unit, series) in sorted(merged.items())]


def render(families: list[Family]) -> bytes:
    """Families in Prometheus text exposition format."""

    class Fixed:
        def collect(self):
            for name, doc, kind, unit, samples in families:
                metric = Metric(name, doc, kind, unit)
                for sample_name, labels, value in samples:
                    metric.add_sample(sample_name, dict(labels), value)
                yield metric

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return generate_latest(registry)


class MetricsAggregate:
    """The Ray actor that holds each Gateway replica's last published samples (plain class: bound
    with ray.remote by `ReplicaMetrics`)."""

    def __init__(self):
        self._published: dict[str, tuple[int, float, list[Family]]] = {}  # replica -> (sequence, heard, families)

    def publish(self, replica: str, sequence: int, families: list[Family]) -> None:
        """A replica's cumulative samples; an older publication arriving late is ignored (its counters are lower)."""
        seen = self._published.get(replica)
        if seen is None or sequence > seen[0]:
            self._published[replica] = (sequence, time.monotonic(), families)

    def text(self) -> bytes:
        now = time.monotonic()
        return render(merge({r: (heard, fams) for r, (_, heard, fams) in self._published.items()}, now))

    def replicas(self) -> dict[str, float]:
        """Every replica heard from, with seconds since its last publication (for tests and operators)."""
        now = time.monotonic()
        return {r: round(now - heard, 3) for r, (_, heard, _) in self._published.items()}


def aggregate_name(app_name: str) -> str:
    return f"metrics-aggregate:{app_name}"


class ReplicaMetrics:
    """One Gateway replica's side: publishes its registry to the application's MetricsAggregate every
    PUBLISH_INTERVAL_S from a thread of its own (so an idle replica's gauges stay live), and answers
    scrapes from the aggregate. `refresh()` is called before each publication (the policy state)."""

    def __init__(self, registry: CollectorRegistry, refresh):
        from ray import serve

        context = serve.get_replica_context()  # raises outside a Serve replica: the caller serves its own registry
        self.replica = context.replica_id.unique_id
        self.registry, self.refresh = registry, refresh
        self._sequence, self._lock = 0, threading.Lock()
        self._actor = self._aggregate(context.replica_id.deployment_id.app_name)
        self._stop = threading.Event()
        threading.Thread(target=self._publish_every_interval, name="tandem-metrics-publisher", daemon=True).start()

    @staticmethod
    def _aggregate(app_name: str):
        import ray

        actor = ray.remote(MetricsAggregate).options(
            name=aggregate_name(app_name), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
            num_cpus=0, max_restarts=-1, max_task_retries=-1)
        return actor.remote()

    def _snapshot(self) -> tuple[int, list[Family]]:
        self.refresh()
        with self._lock:  # sequence numbers in the order the samples were read
            self._sequence += 1
            return self._sequence, families_of(self.registry)

    def _publish_every_interval(self) -> None:
        while not self._stop.wait(PUBLISH_INTERVAL_S):
            try:
                self._actor.publish.remote(self.replica, *self._snapshot())
            except Exception:  # the actor restarting; the next interval publishes again
                log.warning("metrics: could not publish this replica's samples", exc_info=True)

    async def text(self) -> bytes:
        """The aggregate, with this replica's samples of now in it. Raises TimeoutError when the
        aggregate does not answer in SCRAPE_TIMEOUT_S."""

        async def ask() -> bytes:
            await self._actor.publish.remote(self.replica, *self._snapshot())
            return await self._actor.text.remote()

        return await asyncio.wait_for(ask(), timeout=SCRAPE_TIMEOUT_S)

    def stop(self) -> None:
        self._stop.set()


def replica_metrics(registry: CollectorRegistry, refresh) -> ReplicaMetrics | None:
    """This Serve replica's ReplicaMetrics; None outside a Serve replica (a Gateway built in a test
    process), where a Gateway answers its own registry."""
    try:
        from ray import serve

        serve.get_replica_context()
    except Exception:
        return None
    return ReplicaMetrics(registry, refresh)
