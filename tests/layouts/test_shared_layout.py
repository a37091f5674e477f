"""The shared layout through HTTP (`layout: shared`, serve_config.shared.yaml): one SharedEngine
deployment answers tandem-block, tandem-verified and tandem-ar from one copy of the weights; a long
answer of one mode does not hold another mode's request back; a client that leaves frees its row;
a prompt head prefilled for one mode serves the others; a dead replica takes every mode with it and
its requests end in a clean 503 or an answer, never a hang.

The app runs in its own process and Ray cluster (tests/hardening/conftest.py's child_app), in a package
of its own so that no other test app idles beside it (each package's app stops when its package ends)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid

import httpx
import pytest

from tests.hardening.conftest import child_app
from tests.helpers import wait_until

TOKEN = "shared-admin-" + uuid.uuid4().hex[:8]
DEADLINE_S = 10  # the app's request_timeout_s: a request on a dead replica ends by it
LONG = {"model": "tandem-ar", "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 3000,
        "temperature": 2e-4, "stream": True, "ignore_eos": True}  # near-greedy: one token per step (no prompt-lookup runs); no early stop
SYSTEM = "You are a careful assistant. Answer with the fields asked for, nothing else, in the order asked. " * 4


@pytest.fixture(scope="module")
def shared_app(tiny_checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("shared-app")
    args = {"checkpoint": str(tiny_checkpoint), "layout": "shared", "request_timeout_s": DEADLINE_S,
            "engine": {"threads": 1, "lane_threads": 2, "canvas_nice": 10, "max_batch_size": 4, "max_queue": 16, "sure_entropy": 100.0}}
    with child_app(args, out, {"TANDEM_ADMIN_TOKEN": TOKEN}) as (url, _):
        yield url


def stats(url: str) -> dict:
    r = httpx.get(f"{url}/admin/stats", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def engine(url: str) -> dict:
    return stats(url)["engines"]["shared"]


def ask(url: str, model: str, max_tokens: int = 8, messages=None) -> httpx.Response:
    messages = messages or [{"role": "user", "content": "Classify the review: the battery died after two days."}]
    return httpx.post(f"{url}/v1/chat/completions", json={"model": model, "messages": messages, "max_tokens": max_tokens}, timeout=60)


def test_one_engine_deployment_serves_every_mode(shared_app):
    s = stats(shared_app)
    assert s["layout"] == "shared" and list(s["engines"]) == ["shared"]
    assert (s["engines"]["shared"]["deployment"], s["engines"]["shared"]["modes"]) == ("SharedEngine", ["block", "verified", "ar"])
    assert set(httpx.get(f"{shared_app}/ready", timeout=10).json()["engines"]) == {"shared"}

    async def every_mode():
        async with httpx.AsyncClient(base_url=shared_app, timeout=60) as client:
            return await asyncio.gather(*(client.post("/v1/chat/completions", json={
                "model": f"tandem-{m}", "messages": [{"role": "user", "content": "Summarize: the meeting moved to Tuesday."}],
                "max_tokens": 8}) for m in ("block", "verified", "ar")))

    for mode, r in zip(("block", "verified", "ar"), asyncio.run(every_mode())):
        assert r.status_code == 200, r.text
        assert r.headers["x-tandem-mode"] == mode and r.json()["tandem"]["mode"] == mode
    after = engine(shared_app)
    assert set(after["stats"]["steps"]) == {"block", "verified", "ar"}, "a mode was not decoded by the one engine"
    assert after["stats"]["completed"] >= 3
    step_ms = wait_until(lambda: stats(shared_app)["routing"]["step_ms"]["shared"], lambda ms: len(ms) == 3, timeout_s=30.0)  # the next poll reads them
    assert set(step_ms) == {"block", "verified", "ar"} and min(step_ms.values()) > 0, "routing did not read each mode's step time"


def test_a_long_answer_does_not_hold_another_modes_request_back_and_its_client_can_leave(shared_app):
    before = engine(shared_app)["stats"]

    async def scenario():
        async with httpx.AsyncClient(base_url=shared_app, timeout=60) as client:
            async with client.stream("POST", "/v1/chat/completions", json=LONG) as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                async for line in lines:  # the long AR answer is decoding once its first text arrives
                    if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                        break
                started = time.perf_counter()
                block = await client.post("/v1/chat/completions", json={
                    "model": "tandem-block", "messages": [{"role": "user", "content": "Add step by step: 12 7 4 30 9"}], "max_tokens": 16})
                took = time.perf_counter() - started
                running = engine(shared_app)["running"]  # the long answer is still decoding (3000 tokens)
            return block, took, running  # leaving the `async with` closes the stream: the client went away

    block, took, running = asyncio.run(scenario())
    assert block.status_code == 200 and block.headers["x-tandem-mode"] == "block", block.text
    assert running == 1, "the block request waited for the long AR answer to end"
    after = wait_until(lambda: engine(shared_app), lambda e: e["running"] == 0 and e["stats"]["cancelled"] > before["cancelled"], timeout_s=30.0)
    assert after["running"] == 0, "the AR row whose client left is still decoding"
    assert after["stats"]["cancelled"] == before["cancelled"] + 1
    assert after["stats"]["steps"]["ar"] > before["steps"].get("ar", 0) and after["stats"]["steps"]["block"] > before["steps"].get("block", 0)


def test_a_prompt_head_prefilled_for_block_serves_ar_and_verified(shared_app):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Extract the city: Alice lives in Paris. {uuid.uuid4().hex}"}]
    cache = lambda: engine(shared_app)["stats"]["prefix_cache"]  # noqa: E731
    first = ask(shared_app, "tandem-block", messages=messages)
    assert first.status_code == 200, first.text
    stored = cache()
    for model in ("tandem-ar", "tandem-verified"):
        assert ask(shared_app, model, messages=messages).status_code == 200
    reused = cache()
    assert reused["hits"] == stored["hits"] + 2, (stored, reused)
    assert reused["reused_tokens"] > stored["reused_tokens"]


@pytest.mark.slow
def test_a_dead_shared_replica_takes_every_mode_with_it_and_ends_their_requests_cleanly(shared_app):
    """No other engine serves any mode: requests in flight and sent meanwhile end by their deadline
    in an answer (Serve's replacement came up in time) or a 503 with Retry-After; then every mode is served again."""
    victim = engine(shared_app)["pid"]

    async def scenario():
        async with httpx.AsyncClient(base_url=shared_app, timeout=60) as client:
            async def one(model: str):
                started = time.perf_counter()
                r = await client.post("/v1/chat/completions", json={"model": model, "max_tokens": 600, "temperature": 2e-4, "ignore_eos": True,
                                                                    "messages": [{"role": "user", "content": "Tell me a long story."}]})
                return r, time.perf_counter() - started

            modes = ("block", "verified", "ar")
            in_flight = [asyncio.create_task(one(f"tandem-{m}")) for m in modes]
            # the first three are decoding (the replica's load, as the Gateway's poll reads it) before the kill
            await asyncio.to_thread(wait_until, lambda: engine(shared_app).get("running", 0), lambda running: running >= 3, 60.0,
                                    what="one request of each mode decoding on the shared replica")
            os.kill(victim, signal.SIGKILL)
            meanwhile = [asyncio.create_task(one(f"tandem-{m}")) for m in modes]  # sent while it is down
            return await asyncio.gather(*in_flight, *meanwhile)

    for r, took in asyncio.run(scenario()):
        assert took <= DEADLINE_S + 3.0, f"a request took {took:.1f} s, past its {DEADLINE_S} s deadline"
        assert r.status_code in (200, 503), r.text
        if r.status_code == 503:
            assert r.headers.get("retry-after") and r.json()["error"]["code"] in ("engine_timeout", "engine_unavailable"), r.text
    back = wait_until(lambda: stats(shared_app), lambda s: s["engines"]["shared"].get("pid") not in (None, victim)
                      and not s["routing"]["health"]["shared"]["down"], timeout_s=240.0)
    assert back["engines"]["shared"].get("pid") not in (None, victim), "no replacement replica answered"
    for model in ("tandem-block", "tandem-verified", "tandem-ar"):
        assert ask(shared_app, model).status_code == 200
