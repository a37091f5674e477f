"""Replica fault: SIGKILL the BlockEngine replica in the middle of a block-heavy load. Requests in
flight fail over to the policy's on_engine_failure mode (block/verified -> ar) or fail cleanly
with 503; under 1% fail; Ray Serve starts a new replica and it serves block requests again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import httpx
import pytest

from tests.hardening.conftest import admin_stats
from tests.hardening.load import mixed_workload, run_load, summary

N, CONCURRENCY, KILL_AFTER = 300, 16, 50


@pytest.mark.slow
def test_killing_the_block_replica_mid_load_loses_under_one_percent(app_url, tmp_path):
    victim = admin_stats(app_url)["engines"]["block"]["pid"]
    killed_at = {}

    async def kill_once(done: int):
        if done >= KILL_AFTER and not killed_at:
            killed_at["count"] = done
            os.kill(victim, signal.SIGKILL)

    started = time.perf_counter()
    workload = mixed_workload(models=("tandem-block", "tandem-verified", "tandem", "tandem-block"))
    outcomes = asyncio.run(run_load(app_url, N, CONCURRENCY, workload, on_done=kill_once))
    report = summary(outcomes, time.perf_counter() - started) | {"killed_pid": victim, "killed_after": killed_at.get("count")}
    (tmp_path / "fault.json").write_text(json.dumps(report, indent=1))
    print(f"\nreplica fault: {json.dumps(report)}")

    assert killed_at, "the replica was never killed"
    assert len(outcomes) == N
    failed = [o for o in outcomes if o.status != 200 or o.error]
    for o in failed:
        assert o.status in (503, 429), f"a failure that is not a clean 503/429: {o}"
        assert o.error != "not_an_openai_error_body"
    assert len(failed) < N * 0.01, f"{len(failed)} of {N} failed: {report['errors']}"
    assert report["degraded"] >= 1, "no request failed over: did the kill land mid-load?"

    # Ray Serve replaces the replica; block requests are served in block mode again.
    deadline, last = time.time() + 90, None
    while time.time() < deadline:
        r = httpx.post(f"{app_url}/v1/chat/completions", timeout=30,
                       json={"model": "tandem-block", "messages": [{"role": "user", "content": "back?"}], "max_tokens": 4})
        last = (r.status_code, r.headers.get("x-tandem-mode"), r.headers.get("x-tandem-degraded"))
        if last == (200, "block", None):
            break
        time.sleep(1)
    assert last == (200, "block", None), f"the block engine did not come back in 90 s: {last}"
    new = admin_stats(app_url)["engines"]["block"]
    assert new["pid"] != victim and new["running"] == 0
