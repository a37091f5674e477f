"""Redis outage: the private Redis that holds the policy and the decisions stream crashes during
load. Serving goes on with the last known policy, lost decision-log entries are counted, and
when Redis is back the store reconnects and a policy change reaches requests. Every phase waits on
what the app reports (load flowing, the outage noticed, the reconnect), not on a clock; the time
limits are deadlock guards, and the measured times are printed."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.hardening.conftest import ADMIN_TOKEN, stats_by_replica
from tandem.bench.load import mixed_workload, run_load

HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GUARD_S = 60.0  # no phase below needs more than a few seconds; a hang fails here, not in CI's timeout
CHUNK = 16  # requests per round of the background load (8 in flight)


def store_status(url: str) -> dict:
    r = httpx.get(f"{url}/admin/policy", headers=HEADERS, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["store"]


def decisions_log(url: str) -> dict:
    """The decisions log's written and dropped counts, summed over the Gateway replicas."""
    logs = [s["decisions_log"] for s in stats_by_replica(url).values()]
    return {k: sum(x[k] for x in logs) for k in ("written", "dropped")}


def wait_for(predicate, timeout_s: float, step_s: float = 0.05):
    """Seconds until `predicate()` is true; fails after `timeout_s`."""
    started = time.perf_counter()
    while not predicate():
        assert time.perf_counter() - started < timeout_s, f"not within {timeout_s} s"
        time.sleep(step_s)
    return time.perf_counter() - started


def served_version(url: str) -> str | None:
    r = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                   json={"model": "tandem-ar", "messages": [{"role": "user", "content": "version?"}], "max_tokens": 2})
    return r.headers.get("x-tandem-policy-version") if r.status_code == 200 else None


@pytest.mark.slow
def test_serving_survives_a_redis_crash_and_reconnects(hardened_app):
    from policies.stores import load_store

    url, redis_server = hardened_app["url"], hardened_app["redis"]
    version_before = int(store_status(url)["version"])
    log_before = decisions_log(url)

    def outage_seen() -> tuple[dict, dict] | None:
        status, log = store_status(url), decisions_log(url)
        return (status, log) if not status["healthy"] and log["dropped"] > log_before["dropped"] else None

    async def scenario():
        outcomes, stop, workload = [], asyncio.Event(), mixed_workload()

        async def load():  # rounds of CHUNK requests until the outage is over
            while not stop.is_set():
                outcomes.extend(await run_load(url, CHUNK, 8, workload))

        loading = asyncio.create_task(load())
        try:
            async with asyncio.timeout(GUARD_S):
                while len(outcomes) < CHUNK:  # requests are flowing (and logging decisions)
                    await asyncio.sleep(0.05)
                redis_server.crash()
                while (during := await asyncio.to_thread(outage_seen)) is None:  # under load, with Redis down
                    await asyncio.sleep(0.1)
        except TimeoutError:
            status, log = await asyncio.to_thread(lambda: (store_status(url), decisions_log(url)))  # (blocking calls: off the loop)
            pytest.fail(f"in {GUARD_S:.0f} s under load with Redis down, the store did not report the outage or the "
                        f"decisions log counted no lost entry: {status}, {log} (before {log_before})")
        finally:
            if redis_server.proc.poll() is not None:  # crashed: back, for the rest of the test and the suite
                redis_server.start()
            stop.set()
        await loading
        return outcomes, during

    outcomes, (status_during, log_during) = asyncio.run(scenario())
    failed = [o for o in outcomes if o.status != 200 or o.error]
    print(f"\nredis outage: {len(outcomes)} requests, {len(failed)} failed; store during outage {status_during}; "
          f"decisions log before {log_before}, during {log_during}")
    assert not failed, f"requests failed while Redis was down: {failed[:3]}"
    assert status_during["connection_errors_total"] >= 1
    assert int(status_during["version"]) == version_before, "the last known policy was not kept"

    # Redis is back: the watcher reconnects (exponential backoff, at most 5 s between tries) ...
    reconnect_s = wait_for(lambda: store_status(url)["healthy"], timeout_s=GUARD_S, step_s=0.2)
    written = decisions_log(url)["written"]
    assert served_version(url) == str(version_before)
    wait_for(lambda: decisions_log(url)["written"] > written, timeout_s=GUARD_S, step_s=0.1)

    # ... and a policy written by another client (the operator's CLI) reaches requests.
    with load_store(redis_server.url, prefix=hardened_app["prefix"], watch=False) as store:
        current = store.current()
        assert current.version == version_before, "the policy did not survive the Redis restart"
        changed = store.apply(current.content() | {"description": "after the outage"}, expect_version=current.version,
                              note="hardening: redis outage")
        applied_at = time.perf_counter()
        wait_for(lambda: served_version(url) == str(changed.version), timeout_s=GUARD_S, step_s=0.02)
        propagation_s = time.perf_counter() - applied_at
        # restore (a fresh prefix serves the built-in default as version 0, which no history holds)
        store.apply(current.content(), expect_version=changed.version, note="hardening: restore")
    print(f"store reconnected {reconnect_s:.2f} s after Redis returned; new policy served after {propagation_s:.3f} s")
