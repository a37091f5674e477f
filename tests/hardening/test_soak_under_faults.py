"""The soak under faults (`tandem bench chaos`'s short form, against the hardening app): mixed
traffic at concurrency 16 (every mode, chat and text, one in five streamed) while 8 oversized
prompts are kept in flight for 3 s, then the AR engine's replica, the block engine's replica and the Gateway replica are SIGKILLed in turn and Redis (the
policy store and the decisions stream) is stopped for 3 s. One soak; each test reads its fault's
window (the requests that ended between that fault and the next).

Engine replicas (issue 17's targets): the gateway notices a death within about a second
(router.decision.engine_health), fails the requests waiting on the dead replica over to the policy's
on_engine_failure mode and sends new ones there until the replacement answers; under 1% of whole
requests fail, none waits more than 5 s past the kill. A stream that has already sent text cannot
move: it ends with an error event and [DONE], and is counted apart.

A Gateway replica (this app runs two, as serve_config.yaml does): requests in flight on it are
answered by Ray Serve's proxy, not by Tandem (a plain-text 500 or a cut stream: Ray 2.60's proxy
writes a body only for its own 408/429/503; docs/operations.md); new requests go to the other
replica at once. With a single replica they would wait for Serve's replacement (~17 s here)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from tandem.bench.chaos import Admin, kill_engine, kill_gateway, oversized_prompts, soak, stop_redis, table
from tests.hardening.conftest import ADMIN_TOKEN, APP_ARGS
from tests.helpers import wait_until

WAIT_PAST_KILL_S = 5.0


@pytest.fixture(scope="module")
def soak_report(hardened_app, tmp_path_factory):
    url, redis = hardened_app["url"], hardened_app["redis"]
    admin = Admin(url, ADMIN_TOKEN)
    faults = [oversized_prompts(url, admin, hold_s=3.0), kill_engine(admin, "ar"), kill_engine(admin, "block"), kill_gateway(admin),
              stop_redis(admin, redis.crash, redis.start, hold_s=3.0)]
    report = asyncio.run(soak(url, faults, concurrency=16, deadline_s=APP_ARGS["request_timeout_s"], settle_s=2.0))
    (tmp_path_factory.mktemp("soak") / "soak.json").write_text(json.dumps(report, indent=1))
    print(f"\nsoak under faults:\n{table(report)}")
    return {row["fault"].split(" ")[1]: row | {"service_s": report["fault_free_median_s"] or 0.0} for row in report["faults"]} | {"total": report["total"]}


def check_bounded(row: dict, wait_s: float | None = WAIT_PAST_KILL_S) -> None:
    """Requests ended in the fault's window, none hung, none that met the fault waited over `wait_s`
    past it (None: not checked) beyond what a request costs on this machine with nothing broken (the
    soak's fault-free median: a request that starts after the kill is timed from its start, and on a
    machine at a third of its speed the failover's own re-run took 5.16 s), and the fault was repaired.
    A request met an engine kill when it started before the gateway's probe can have counted the engine
    down (tandem.bench.chaos.DETECTION_S, from the probe's configuration); a later one is routed around the
    dead replica and is held to the deadline (`hung`): under a CPU hog one that started 10 s after the
    kill, while the replacement replica loaded its model, took 4.6 s without being failed over."""
    assert row["requests"] > 0, f"no request ended in the window of {row['fault']}"
    assert row["hung"] == 0, f"{row['hung']} requests hung past the deadline: {row}"
    if wait_s is not None:
        assert row["max_wait_past_fault_s"] <= wait_s + row["service_s"], f"a request waited {row['max_wait_past_fault_s']} s past the fault: {row}"
    assert row["repaired_s"] is not None, f"{row['fault']}: not repaired: {row}"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ar", "block"])
def test_an_engine_replica_killed_under_load_fails_fast_and_loses_under_one_percent(soak_report, engine):
    row = soak_report[engine]
    check_bounded(row)
    assert row["lost"] == 0, f"requests with no complete answer and no error: {row}"
    whole_failed = row["failed"] - row["streams_cut"]
    assert whole_failed < 0.01 * row["requests"], f"{whole_failed} of {row['requests']} failed: {row}"
    assert row["degraded"] >= 1, f"no request failed over: did the kill land mid-load? {row}"


@pytest.mark.slow
def test_the_gateway_replica_killed_under_load_ends_every_request_and_recovers(soak_report):
    row = soak_report["gateway"]
    check_bounded(row)
    assert row["failed"] <= 16, f"more failures than requests in flight at the kill: {row}"
    assert set(row["errors"]) <= {"500/not_an_openai_error_body", "500/http", "200/no_done", "0/RemoteProtocolError", "0/ReadError"}, row


@pytest.mark.slow
def test_oversized_prompts_under_load_fail_no_other_request(soak_report):
    """8 prompts of 3.9 MB kept in flight (issue 35: 9 of 36 unrelated requests got a 503): each is
    a 400, and no unrelated request fails, degrades or waits on them."""
    row = soak_report["prompts"]
    check_bounded(row, wait_s=None)
    assert row["failed"] == 0 and row["degraded"] == 0 and row["lost"] == 0, row
    assert " x 400" in row["notes"] and all(f" x {s}" not in row["notes"] for s in (0, 500, 503)), row["notes"]


@pytest.mark.slow
def test_a_redis_stop_under_load_loses_no_request(soak_report):
    row = soak_report["redis"]
    check_bounded(row, wait_s=None)
    assert row["failed"] == 0 and row["lost"] == 0, row


@pytest.mark.slow
def test_the_whole_soak_hangs_nothing(soak_report):
    total = soak_report["total"]
    assert total["hung"] == 0, total
    assert total["lost"] == soak_report["gateway"]["lost"], "requests lost outside the Gateway's kill (the one Tandem cannot answer for)"


@pytest.mark.slow
def test_long_answers_on_a_killed_engine_end_by_their_deadline_and_leave_no_orphaned_rows(hardened_app, soak_report):
    """Long AR answers in flight when the AR replica dies fail over to verified (the default map)
    with only the time left of their deadline, never a fresh timeout; when that runs out they get a
    503 with Retry-After and the block engine drops their rows: block requests are served at once
    afterwards, not minutes later behind rows nobody waits for."""
    url, deadline_s = hardened_app["url"], APP_ARGS["request_timeout_s"]
    admin = Admin(url, ADMIN_TOKEN)
    # temperature 2e-4 (near-greedy, sampled): one token per step; greedy steps check prompt-lookup
    # guesses, and the tiny model's long story loops: a greedy answer would finish inside the deadline;
    # ignore_eos: a sampled one may write its end-of-sequence token early (1 in 48 within 4,000 tokens)
    body = {"model": "tandem-ar", "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 3000,
            "temperature": 2e-4, "ignore_eos": True}

    async def scenario():
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            async def one():
                started = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=body)
                return r, time.perf_counter() - started

            calls = [asyncio.create_task(one()) for _ in range(4)]
            # the four are decoding on the AR engine (its load, as the Gateway's poll reads it) before the kill
            await asyncio.to_thread(wait_until, lambda: (admin.stats() or {}).get("engines", {}).get("ar", {}).get("running", 0),
                                    lambda running: running >= 4, 60.0, what="four long answers decoding on the AR engine")
            fault = kill_engine(admin, "ar")
            await asyncio.to_thread(fault.inject)
            return await asyncio.gather(*calls), fault

    results, fault = asyncio.run(scenario())
    for r, took in results:
        assert took <= deadline_s + 2.0, f"a long answer took {took:.1f} s, past its {deadline_s} s deadline"
        assert r.status_code in (200, 503), r.text
        if r.status_code == 503:
            assert r.headers.get("retry-after") and r.json()["error"]["code"] in ("engine_timeout", "engine_unavailable"), r.text
    block = wait_until(lambda: (admin.stats() or {}).get("engines", {}).get("block", {}), lambda b: b.get("running") == 0, 3.0)
    assert block["running"] == 0, f"rows nobody waits for are still decoding on the block engine: {block}"
    r = httpx.post(f"{url}/v1/chat/completions", timeout=10,
                   json={"model": "tandem-block", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert r.status_code == 200 and r.headers["x-tandem-mode"] == "block"
    wait_until(fault.repaired, timeout_s=90.0, what="the AR engine's replacement answering")  # the app whole again for the tests after


@pytest.mark.slow
def test_no_secret_reached_any_log_of_the_run(hardened_app, soak_report):
    """After every fault above (Redis down and back, replicas killed and restarted) and the rest of
    the hardening run: neither the Redis password nor the admin token is in any log Ray or Tandem
    wrote (the driver's, Ray's own, every replica's), or in what the CLI prints about the store."""
    import subprocess
    import sys

    from tests.hardening.conftest import REDIS_PASSWORD, REPO, app_logs

    logs = app_logs(hardened_app["dir"])
    assert any("policy store" in text and "unreachable" in text for text in logs.values()), \
        "the Redis outage was not logged: the check below would prove little"
    cli = subprocess.run([sys.executable, "-m", "tandem.main", "policy", "show", "--source", hardened_app["redis"].url,
                          "--prefix", hardened_app["prefix"]], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert cli.returncode == 0, cli.stderr
    outputs = logs | {"tandem policy show": cli.stdout + cli.stderr}
    for secret, name in ((REDIS_PASSWORD, "Redis password"), (ADMIN_TOKEN, "admin token")):
        leaked = [where for where, text in outputs.items() if secret in text]
        assert not leaked, f"the {name} is in {leaked}"
