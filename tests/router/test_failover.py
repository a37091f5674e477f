"""Failover's degraded path (router/gateway/failover.py) through the Gateway's HTTP routes, in seconds:
the shipped tiny engine in-process behind the AR engine's name, and a block engine whose replica
is gone. A request routed to block is answered in the policy's on_engine_failure mode, says so
(headers, body, feed, stats), and follows the policy that routed it; without a failure mode it is
a 503 with Retry-After. It fails over under the policy and the prices that routed it (the Decision
carries both), whatever the live router holds by then. (The soak and cluster suites cover the same
with Ray and killed replicas.)"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import yaml

from engines.cost import CostProfile
from engines.types import MODES
from tests.router.local_engines import GoneEngine, LocalEngine, answers_from


@pytest.fixture(scope="module")
def engine():
    from engines.replica.deployment import EngineDeployment

    return LocalEngine(EngineDeployment(modes=MODES, max_wait_s=0.001))


@pytest.fixture
def policy_file(tmp_path):
    from policies.stores import DEFAULT_POLICY_PATH

    path = tmp_path / "policy.yaml"
    shutil.copy(DEFAULT_POLICY_PATH, path)
    return path


KEEP = object()  # served(cost_after=KEEP): the router keeps its profile


def served(engine, policy_file, requests, change_policy=None, cost=None, cost_after=KEEP):
    """Answers to `requests` ((path, json body) pairs) from a Gateway whose block engine is gone
    and whose AR engine is `engine`; its router prices with the cost profile `cost` (the gone
    engine never sends one). Between the decision and the failover of each request,
    `change_policy(dict)` is written and the router's profile becomes `cost_after` (unless KEEP). Returns the
    answers and the gateway."""
    from router.gateway.orchestration import Gateway

    gw = Gateway(GoneEngine(), engine, policy_source=str(policy_file), request_timeout_s=60.0, probe_interval_s=0.05)
    gw.router.cost = cost
    if change_policy is not None or cost_after is not KEEP:  # the live router changes while the request is in flight
        decide = gw.router.decide

        def decide_then_change(*args, **kwargs):
            decision = decide(*args, **kwargs)
            if change_policy is not None:
                policy_file.write_text(yaml.safe_dump(change_policy(yaml.safe_load(policy_file.read_text()))))
                gw.router.store.check_interval_s = 0.0
                live = gw.router.policy
                assert live.version != decision.policy_version or live.on_engine_failure != decision.policy.on_engine_failure
            if cost_after is not KEEP:
                gw.router.cost = cost_after
            return decision

        gw.router.decide = decide_then_change

    return asyncio.run(answers_from(gw, requests)), gw


CHAT = {"model": "tandem-block", "messages": [{"role": "user", "content": "Extract the name as JSON: Alice Smith lives in Paris."}],
        "max_tokens": 12}


def test_a_request_for_a_gone_engine_is_answered_in_the_failure_mode_and_says_so(engine, policy_file):
    (whole, streamed), gw = served(engine, policy_file, [("/v1/chat/completions", CHAT), ("/v1/chat/completions", CHAT | {"stream": True})])
    assert whole.status_code == 200, whole.text
    assert (whole.headers["x-tandem-mode"], whole.headers["x-tandem-degraded"], whole.headers["x-tandem-route-reason"]) == ("ar", "true", "forced_model")
    body = whole.json()
    assert body["tandem"]["degraded"] and (body["tandem"]["mode"], body["tandem"]["routed_mode"]) == ("ar", "block")
    assert body["usage"]["completion_tokens"] >= 1 and body["choices"][0]["message"]["content"]
    assert streamed.status_code == 200 and streamed.headers["x-tandem-degraded"] == "true"
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert events[-1]["tandem"]["degraded"] and "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    feed = gw.feed.after(0)
    assert [(e["status"], e["mode"], e["routed_mode"], e["degraded"], e["stream"]) for e in feed] == [
        (200, "ar", "block", True, False), (200, "ar", "block", True, True)]
    assert feed[0]["latency_ms"] > 0 and feed[0]["output_tokens"] == body["usage"]["completion_tokens"]
    stats = gw.stats.snapshot()
    assert stats["degraded"] == 2 and stats["modes"]["ar"]["requests"] == 2
    assert gw.view.health.is_down("block") and not gw.view.health.is_down("ar")


def test_without_a_failure_mode_the_client_gets_a_503_with_retry_after(engine, policy_file):
    data = yaml.safe_load(policy_file.read_text())
    data["on_engine_failure"] = {"verified": "ar", "ar": "verified"}  # nothing for block
    policy_file.write_text(yaml.safe_dump(data))
    (answer,), gw = served(engine, policy_file, [("/v1/chat/completions", CHAT)])
    assert answer.status_code == 503 and answer.headers["retry-after"] and answer.json()["error"]["code"] == "engine_unavailable"
    assert [(e["status"], e["routed_mode"]) for e in gw.feed.after(0)] == [(503, "block")]


def test_failover_follows_the_policy_that_routed_the_request(engine, policy_file):
    """A policy written while a request is in flight does not change where it fails over to."""

    def drop_block_failover(data):
        return data | {"on_engine_failure": {"verified": "ar", "ar": "verified"}}

    (answer,), gw = served(engine, policy_file, [("/v1/chat/completions", CHAT)], change_policy=drop_block_failover)
    assert answer.status_code == 200 and answer.headers["x-tandem-degraded"] == "true"
    assert "block" not in gw.router.policy.on_engine_failure  # the live policy has none by now


# AR at ten thousand seconds a forward: no request can fail over to AR in a 60 s deadline by this profile
SLOW = CostProfile(ms_per_forward={"block": {1: 1e7, 8: 1e7}, "ar": {1: 1e7, 8: 1e7}}, canvas=256)


@pytest.mark.parametrize(("routed_by", "live"), [(None, SLOW), (SLOW, None)], ids=["routed-unpriced", "routed-by-slow-profile"])
def test_failover_prices_the_retry_as_the_request_was_routed(engine, policy_file, routed_by, live):
    """Whether the failure mode can finish in the time left is judged by the prices the request was
    routed by: a profile that lands after routing changes nothing for it, in either direction."""
    (answer,), gw = served(engine, policy_file, [("/v1/chat/completions", CHAT)], cost=routed_by, cost_after=live)
    assert gw.router.cost is live
    if routed_by is SLOW:  # by its own prices AR cannot finish in time: the client gets the 503 at once
        assert answer.status_code == 503 and answer.headers["retry-after"], answer.text
        assert [(e["status"], e["routed_mode"]) for e in gw.feed.after(0)] == [(503, "block")]
    else:  # unpriced when routed: it fails over although the live profile now says AR is slow
        assert answer.status_code == 200 and answer.headers["x-tandem-degraded"] == "true", answer.text
