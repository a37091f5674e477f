"""Load: 600 mixed requests at concurrency 32 over HTTP. Every request gets a 200, or the outcome
documented for it: where the machine cannot finish it within the app's deadline (a busy CI machine),
a 503 engine_timeout with Retry-After at that deadline, not before and not much after. Nothing
else: 32 requests in flight cannot fill an engine's batch of 8 and queue of 64, so a 429 (or a
stream's in-band engine_overloaded) is a bug here, not load. p99 latency is reported, and no
replica's memory grows with the load. (docs/operations.md: 600 of 600 answered with a 200 on the
2-core VM.)

The burst test below is where a full queue is the documented outcome: 429 with Retry-After."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.hardening.conftest import APP_ARGS, admin_stats, stats_by_replica
from tests.helpers import wait_until
from tandem.bench.load import Spec, run_load, summary, to_json, mixed_workload

N, CONCURRENCY, WARMUP = 600, 32, 128  # the load of issue 17's report
RSS_MARGIN_MB = 50
DEADLINE_S = APP_ARGS["request_timeout_s"]
LATE_S = 5.0  # what a refusal at the deadline may take beyond it: the gateway's own work on a busy machine
EARLY_S = 0.5  # how much sooner than the deadline the client may see it: the deadline starts when the gateway reads the request


def replica_memory(url: str) -> dict[str, tuple[int, float]]:
    """(pid, RSS MiB) of each Gateway replica and of each engine replica."""
    gateways = stats_by_replica(url)
    out = {f"gateway-{i}": (pid, s["rss_mb"]) for i, (pid, s) in enumerate(sorted(gateways.items()))}
    for name, load in next(iter(gateways.values()))["engines"].items():
        assert "error" not in load, f"engine {name} did not answer: {load}"
        out[name] = (load["pid"], load["rss_mb"])
    return out


def check_answered(outcomes, queue_can_fill: bool = False) -> None:
    """Each outcome is a 200 or the one its circumstances document: a 503 engine_timeout with
    Retry-After at the deadline; with `queue_can_fill` (a burst past batch + queue), a 429 with
    Retry-After, or a stream's in-band engine_overloaded."""
    for o in outcomes:
        if o.status == 503:  # the deadline passed before an engine could answer: refused then, never sooner or later, with Retry-After
            assert o.error == "engine_timeout" and o.retry_after and o.retry_after.isdigit(), f"503 ({o.error}, Retry-After {o.retry_after})"
            assert DEADLINE_S - EARLY_S <= o.latency_s < DEADLINE_S + LATE_S, f"a 503 after {o.latency_s:.1f} s: not at the {DEADLINE_S:g} s deadline"
            continue
        assert o.status == 200 or (queue_can_fill and o.status == 429), f"status {o.status} ({o.error})"
        if o.status == 429:
            assert o.retry_after and o.retry_after.isdigit(), "a 429 without Retry-After"
        if o.status == 200 and o.error is not None:  # a stream's in-band error: only a full queue, where one can fill
            assert queue_can_fill and o.stream and o.error == "engine_overloaded", f"streamed answer failed: {o.error}"


@pytest.mark.slow
def test_six_hundred_requests_at_concurrency_32(app_url, tmp_path):
    asyncio.run(run_load(app_url, WARMUP, CONCURRENCY, mixed_workload(stream_every=10)))  # warm-up: allocator arenas, caches
    before = replica_memory(app_url)

    started = time.perf_counter()
    outcomes = asyncio.run(run_load(app_url, N, CONCURRENCY, mixed_workload(stream_every=10)))
    report = summary(outcomes, time.perf_counter() - started)
    after = replica_memory(app_url)
    report["rss_mb"] = {name: {"pid": before[name][0], "before": before[name][1], "after": after[name][1]} for name in before}
    (tmp_path / "load.json").write_text(json.dumps({"summary": report, "outcomes": to_json(outcomes)}, indent=1))
    print(f"\nload: {json.dumps(report)}\n  written to {tmp_path / 'load.json'}")

    assert len(outcomes) == N
    check_answered(outcomes)
    assert CONCURRENCY < APP_ARGS["engine"]["max_batch_size"] + APP_ARGS["engine"]["max_queue"], "the premise: no queue can fill"
    assert set(report["status"]) <= {"200", "503"}, report["status"]  # check_answered: each 503 at the deadline
    assert {"block", "verified", "ar"} <= set(report["modes"]), f"every mode served: {report['modes']}"
    for name, (pid, rss) in before.items():
        assert after[name][0] == pid, f"{name} replica restarted during the load"
        assert after[name][1] <= rss + RSS_MARGIN_MB, f"{name} RSS grew {rss} -> {after[name][1]} MiB"
    # Requests the gateway gave up on (timeout -> retried elsewhere) leave their batch at its next
    # step; a block row may be mid-canvas, so allow a few seconds for the engines to drain.
    busy = lambda: {n: e for n, e in admin_stats(app_url)["engines"].items() if e["running"] or e["queued"]}  # noqa: E731
    wait_until(busy, lambda engines: not engines, timeout_s=20.0, what="the engines idle after the load")


def test_a_burst_beyond_the_queue_gets_429_with_retry_after(app_url):
    """100 block requests at once against one replica (batch 8 + queue 64): the overflow is refused
    at once with 429 and Retry-After, and everything admitted is answered: served, or refused at the
    deadline where the machine is too busy to drain the queue within it."""
    burst = (Spec("/v1/chat/completions", {"model": "tandem-block", "messages": [{"role": "user", "content": f"burst {i}"}],
                                           "max_tokens": 48, "stream": i % 2 == 1}) for i in range(10**6))  # heavy enough that a loaded client still outruns the engine
    outcomes = asyncio.run(run_load(app_url, 100, 100, burst))
    check_answered(outcomes, queue_can_fill=True)
    statuses = [o.status for o in outcomes]
    assert statuses.count(429) >= 1, "the queue never filled"
    assert len(statuses) - statuses.count(429) >= 64, f"fewer admitted than the queue holds: {sorted(set(statuses))}"
    assert statuses.count(200) >= 8, f"not even a batch served: {statuses.count(200)} of {len(statuses)}"
    # A stream waits for its first item before answering, so a full queue is a real 429 for it too.
    assert any(o.stream and o.status == 429 and o.retry_after for o in outcomes), "no stream got a 429"
