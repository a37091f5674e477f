"""Cancellation: a client that goes away mid-answer frees its scheduler slot at the engine's next
step (running back to 0 within a couple of seconds, counted as cancelled, never as completed)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from router.gateway.calls import TIMEOUT_HEADER
from tests.helpers import wait_until
from tests.hardening.conftest import admin_stats

LONG = 3000  # tokens: seconds of decoding on the tiny model (~2.5 ms each alone on an idle VM), beyond the waits below
LONGEST = 4000  # tokens: as much as the tiny model's 4,096-token context holds after the prompt
FREED_WITHIN_S = 3.0
# A near-greedy sample (2e-4, just over engines.decode.sampling.GREEDY_BELOW): one token per step. Greedy
# AR steps check prompt-lookup guesses (engines.modes.ar_lookup), and the tiny model's long story loops, so
# a greedy 4,000-token answer is written in a few hundred passes and ends before the waits below.
# `ignore_eos`: sampled, the random model writes its end-of-sequence token early now and then (1 answer
# in 48 within 4,000 tokens, measured), and an answer that ended early was a 200 where the test wants a 503.
LONG_STORY = {"messages": [{"role": "user", "content": "Tell me a long story."}], "temperature": 2e-4, "ignore_eos": True}
BATCH = 8  # the hardening app's max_batch_size
PROBES = 3  # one-token answers timed to find the machine's round trip under load
# The client's deadline in round trips (the slowest probe's): room for the row's admission on a
# machine that jitters (it joins within about one), and still a few decode steps against the
# thousands its answer takes; short enough that the busy batch around it outlives it (see the test).
DEADLINE_ROUND_TRIPS = 3


def wait_running(url: str, engine: str, predicate, timeout_s: float) -> tuple[float, dict]:
    started = time.perf_counter()
    while True:
        load = admin_stats(url)["engines"][engine]
        if predicate(load):
            return time.perf_counter() - started, load
        assert time.perf_counter() - started < timeout_s, f"{engine}: not within {timeout_s} s: {load}"
        time.sleep(0.05)


def abandon_a_stream(url: str, model: str, engine: str, request_id: str | None = None) -> None:
    """Streams a long answer and closes the connection after its second content chunk, once the
    row is in the running batch."""
    body = {"model": model, **LONG_STORY, "max_tokens": LONG, "stream": True}
    headers = {"x-request-id": request_id} if request_id else {}
    chunks = 0
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content":"' in line and '"content":""' not in line:
                chunks += 1
                if chunks == 2:  # mid-answer: the row is in the running batch
                    wait_running(url, engine, lambda x: x["running"] == 1, timeout_s=5)
                    break
    # leaving the loop and the `with` closes the connection mid-stream
    assert chunks == 2


@pytest.mark.parametrize("model,engine", [("tandem-ar", "ar"), ("tandem-verified", "block")])
def test_a_stream_abandoned_mid_answer_frees_its_slot(app_url, model, engine):
    before = admin_stats(app_url)["engines"][engine]["stats"]
    abandon_a_stream(app_url, model, engine)
    freed_s, load = wait_running(app_url, engine, lambda x: x["running"] == 0 and x["queued"] == 0, timeout_s=FREED_WITHIN_S)
    after = load["stats"]
    print(f"\n{engine}: slot freed {freed_s:.2f} s after the client left; stats {after}")
    assert after["cancelled"] == before["cancelled"] + 1
    assert after["completed"] == before["completed"], "the abandoned request ran to the end"


def test_a_non_streaming_client_that_times_out_frees_its_slot(app_url):
    before = admin_stats(app_url)["engines"]["ar"]["stats"]
    body = {"model": "tandem-ar", **LONG_STORY, "max_tokens": LONG}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{app_url}/v1/chat/completions", json=body, timeout=httpx.Timeout(10, read=1.5))
    freed_s, load = wait_running(app_url, "ar", lambda x: x["running"] == 0 and x["queued"] == 0, timeout_s=FREED_WITHIN_S)
    print(f"\nnon-streaming: slot freed {freed_s:.2f} s after the client left; stats {load['stats']}")
    assert load["stats"]["cancelled"] == before["cancelled"] + 1
    assert load["stats"]["completed"] == before["completed"]


@contextlib.contextmanager
def busy_batch(url: str, model: str, engine: str, rows: int):
    """`rows` long streamed answers decoding in `engine`'s batch (read as they come, so nothing
    backs up), closed on exit: every step of a row that joins them costs what a full batch costs."""
    stop = threading.Event()

    def one() -> None:
        body = {"model": model, **LONG_STORY, "max_tokens": LONGEST, "stream": True}
        with httpx.Client(timeout=60) as client, client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return

    threads = [threading.Thread(target=one, daemon=True) for _ in range(rows)]
    for t in threads:
        t.start()
    try:
        wait_running(url, engine, lambda x: x["running"] == rows, timeout_s=10)
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)


def round_trips_s(url: str, model: str) -> list[float]:
    """PROBES one-token answers on `model` beside the busy batch, timed: routing, the hop to the
    engine, admission at the batch's next joining point, one step, the way back. A row sent now
    is in the batch within about one of these, on this machine under this load."""
    body = {"model": model, **LONG_STORY, "max_tokens": 1}
    took = []
    for _ in range(PROBES):
        started = time.perf_counter()
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
        took.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text[:300]
    return took


@pytest.mark.parametrize("model,engine", [("tandem-ar", "ar"), ("tandem-verified", "block")])
def test_a_request_the_gateway_gives_up_on_frees_its_engine_row(app_url, model, engine):
    """The gateway's deadline ends the wait: the client gets a 503 with Retry-After and the engine
    drops the row at its next step, instead of decoding for nobody while other requests queue.
    The deadline is not raced against the machine: the request carries its own (x-tandem-timeout-s,
    which the hardening app honours), DEADLINE_ROUND_TRIPS of this machine's one-token round trips
    under this load. So the row is in the batch before it passes, and it passes long before a
    4,000-token answer in a full batch can end (thousands of steps in AR, one token each, where a
    round trip is a step or two plus the hops), on a fast machine as on a busy one (such an answer
    takes ~40 s in AR and over 8 s in verified here). The engine's
    mid-batch admissions show the row joined the batch before it was dropped, not that it was
    cancelled in the queue."""
    with busy_batch(app_url, model, engine, rows=BATCH - 1):
        took = round_trips_s(app_url, model)
    deadline_s = DEADLINE_ROUND_TRIPS * max(took)
    wait_running(app_url, engine, lambda x: x["running"] == 0 and x["queued"] == 0, timeout_s=FREED_WITHIN_S + 10)
    # A fresh busy batch for the request itself: the busy rows are streams under the app's own
    # request deadline (APP_ARGS, 8 s), so the probes above, the request's deadline and the wait for
    # its row to go must all fit in one batch's life (probes, deadline and wait in one batch
    # outlived it on two busy test workers: the busy rows went first).
    with busy_batch(app_url, model, engine, rows=BATCH - 1):
        before = admin_stats(app_url)["engines"][engine]["stats"]
        body = {"model": model, **LONG_STORY, "max_tokens": LONGEST}
        r = httpx.post(f"{app_url}/v1/chat/completions", json=body, headers={TIMEOUT_HEADER: f"{deadline_s:.3f}"}, timeout=60)
        assert r.status_code == 503, f"not a 503 at the {deadline_s:.2f} s deadline: {r.status_code} {r.text[:300]}"
        assert r.json()["error"]["code"] == "engine_timeout" and r.headers.get("retry-after")
        freed_s, load = wait_running(app_url, engine, lambda x: x["running"] == BATCH - 1 and x["stats"]["cancelled"] == before["cancelled"] + 1,
                                     timeout_s=FREED_WITHIN_S)
        print(f"\n{engine}: round trips {[round(t, 2) for t in took]} s, deadline {deadline_s:.2f} s; row freed {freed_s:.2f} s after the gateway's 503; stats {load['stats']}")
        assert load["stats"]["admitted_mid_batch"] == before["admitted_mid_batch"] + 1, "the row never joined the batch before its deadline"
    _, load = wait_running(app_url, engine, lambda x: x["running"] == 0 and x["queued"] == 0, timeout_s=FREED_WITHIN_S + 10)
    assert load["stats"]["completed"] == before["completed"], "an abandoned request ran to the end"
    assert load["stats"]["cancelled"] == before["cancelled"] + BATCH


def test_clients_that_go_away_are_not_logged_as_errors(hardened_app):
    """Abandoned streams and whole requests are ordinary disconnects, not faults: none may leave a
    traceback or an 'unhandled error' in any log the app writes while it happens (the Gateway's and
    the engines' Serve logs, and every worker's stdout and stderr, where an uncaught traceback
    lands: logs/worker-*.err). The test abandons a stream itself (so it checks something when run
    alone) and reads the logs once the Gateway has logged the abandoned request: its own line for a
    client that went away, written as it cancels the engine row (Serve's access line for the request
    is not a barrier: under load a replica sometimes writes none for a request the proxy cancelled;
    the proxy logged the disconnect, the replica nothing). Only what the logs gained from the
    test's start is read: faults other tests cause on purpose (the soak's kills) log tracebacks."""
    from tests.hardening.conftest import app_logs, log_sizes, python_logs

    url, request_id = hardened_app["url"], f"abandoned-{uuid.uuid4().hex}"
    sizes = log_sizes(hardened_app["dir"])
    before = admin_stats(url)["engines"]["ar"]["stats"]["cancelled"]
    abandon_a_stream(url, "tandem-ar", "ar", request_id)
    wait_running(url, "ar", lambda x: x["stats"]["cancelled"] > before, timeout_s=FREED_WITHIN_S)
    logs = wait_until(lambda: python_logs(app_logs(hardened_app["dir"], since=sizes)),
                      lambda logs: any(request_id in text and "replica_tandem_Gateway_" in path for path, text in logs.items()),
                      timeout_s=20.0, what="the Gateway logging the abandoned request")
    assert any("/logs/serve/" in path for path in logs) and any(Path(path).name.startswith("worker-") for path in logs), list(logs)
    faults = {path: text[-3000:] for path, text in logs.items() if "unhandled error" in text or "Traceback" in text}
    assert not faults, faults
