"""Operators: admin auth, policy hot reload through the API, spans and metrics, the decisions stream."""

import json
import math
from datetime import datetime
import time

import httpx
import pytest
import redis

MSG = [{"role": "user", "content": "Classify the review as positive or negative: great phone."}]


def chat(base_url, **kw):
    body = {"model": "tandem", "messages": MSG, "max_tokens": 4} | kw
    return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)


def test_admin_needs_the_bearer_token(base_url, admin_headers):
    assert httpx.get(f"{base_url}/admin/stats").status_code == 401
    wrong = httpx.get(f"{base_url}/admin/stats", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    assert "test-admin-token" not in wrong.text
    answered = chat(base_url, model="tandem-block")  # work the block engine's backlog counted, and is done with
    assert answered.status_code == 200 and answered.headers["x-tandem-mode"] == "block", answered.text
    ok = httpx.get(f"{base_url}/admin/stats", headers=admin_headers, timeout=10)
    assert ok.status_code == 200
    engines = ok.json()["engines"]  # the split layout: each engine deployment with the modes it serves
    assert ok.json()["layout"] == "split" and set(engines) == {"block", "ar"}
    assert (engines["block"]["deployment"], engines["block"]["modes"]) == ("BlockEngine", ["block", "verified"])
    assert (engines["ar"]["deployment"], engines["ar"]["modes"]) == ("AREngine", ["ar"])
    routing = ok.json()["routing"]  # what cost-aware routing sees: calibration, backlog, requests in flight
    assert set(routing["calibration"]) == {"block", "ar"} and set(routing["in_flight"]) == {"block", "ar"}
    # the test's block request has returned: nothing in flight, so no work ahead (router.decision.live_costs.Backlog)
    assert routing["in_flight"]["block"] == 0 and routing["block_backlog_ms"] == 0.0


def routing_content(policy: dict) -> dict:
    """A policy's routing content: all but the store-assigned version and the free-text description."""
    return {k: v for k, v in policy.items() if k not in ("version", "description")}


def test_policy_change_applies_to_the_next_request_and_rolls_back(base_url, admin_headers, policy_restored):
    start = policy_restored  # written back after the test, pass or fail
    before = chat(base_url)
    assert before.status_code == 200, before.text
    # a policy that routes everything to another mode than the starting one (nothing may move it: no confidence
    # floor to fall back from block, no load-aware moves)
    target = "block" if before.headers["x-tandem-mode"] != "block" else "ar"
    everywhere = start | {"task_modes": {t: target for t in start["task_modes"]}, "fallback_mode": target, "confidence_floor": 0.0,
                          "load_aware": start["load_aware"] | {"enabled": False}, "description": f"test: all {target}"}
    # a known earlier version to roll back to: the starting policy, written as is (version 0 is in no history)
    baseline = httpx.post(f"{base_url}/admin/policy", headers=admin_headers,
                          json={"policy": start, "expect_version": start["version"], "note": "test: baseline"})
    assert baseline.status_code == 200, baseline.text
    known = baseline.json()["version"]
    applied = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": everywhere, "expect_version": known})
    assert applied.status_code == 200, applied.text
    version = applied.json()["version"]
    assert version > known > start["version"]
    r = chat(base_url)
    assert r.headers["x-tandem-mode"] == target
    assert r.headers["x-tandem-policy-version"] == str(version)

    stale = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": everywhere, "expect_version": known})
    assert stale.status_code == 409

    back = httpx.post(f"{base_url}/admin/policy/rollback", headers=admin_headers, json={"version": known, "expect_version": version})
    assert back.status_code == 200, back.text
    rolled = back.json()["version"]
    assert rolled > version and routing_content(back.json()["policy"]) == routing_content(start)
    now = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
    assert now["version"] == rolled and routing_content(now) == routing_content(start)  # the shared app ends as it started
    after = chat(base_url)
    assert after.headers["x-tandem-mode"] == before.headers["x-tandem-mode"]
    assert after.headers["x-tandem-policy-version"] == str(rolled)
    history = {h["version"]: h for h in httpx.get(f"{base_url}/admin/policy/history", headers=admin_headers).json()["history"]}
    assert {known, version, rolled} <= set(history) and history[rolled]["note"] == f"rollback to {known}"


def test_invalid_policy_is_refused_with_reasons_and_nothing_changes(base_url, admin_headers):
    before = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
    bad = before | {"task_modes": {"extract": "teleport"}, "confidence_floor": 7}
    r = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": bad})
    assert r.status_code == 400
    assert "task_modes" in r.json()["error"]["message"] and "confidence_floor" in r.json()["error"]["message"]
    after = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
    assert after == before


def test_spans_and_metrics_are_exported(base_url, serve_app):
    r = chat(base_url, model="tandem-verified")
    assert r.status_code == 200
    wanted = ("tandem.requests", "tandem.e2e_request_latency", "tandem.tokens_per_forward", "tandem.draft_acceptance_ratio")
    spans, metrics = [], []
    deadline = time.time() + 15
    while time.time() < deadline:  # metrics are exported every second
        lines = [json.loads(line) for line in serve_app["spans"].read_text().splitlines() if line.strip()]
        spans = [x for x in lines if "name" in x]
        metrics = [x for x in lines if "metrics" in x]
        if all(m in json.dumps(metrics) for m in wanted) and any(s["name"] == "tandem.verify" for s in spans):
            break
        time.sleep(0.5)
    by_name = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    for name in ("tandem.request", "tandem.route", "tandem.engine", "tandem.canvas", "tandem.verify"):
        assert name in by_name, f"no {name} span"
    root = [s for s in by_name["tandem.request"] if s["attributes"].get("tandem.mode") == "verified"][-1]
    trace = root["context"]["trace_id"]
    tree = [s for s in spans if s["context"]["trace_id"] == trace]
    assert {s["name"] for s in tree} >= {"tandem.request", "tandem.route", "tandem.engine", "tandem.canvas", "tandem.verify"}
    route = next(s for s in tree if s["name"] == "tandem.route")
    assert route["attributes"]["decision.mode"] == "verified"
    # the whole decision is on the span, as the decisions stream logged it (every field that is set
    # and not a mapping: the policy snapshot and prices are too large for span attributes)
    logged = logged_entry(serve_app, route["attributes"]["decision.request_id"])
    assert logged is not None, "the request's decision never reached the decisions stream"
    decision = json.loads(logged["decision"])
    on_span = {k: v for k, v in route["attributes"].items() if k.startswith("decision.")}
    assert on_span == {f"decision.{k}": v for k, v in decision.items() if v is not None and not isinstance(v, dict)}
    # engine -> verify -> one canvas per round, timed by the engine replica itself
    engine = next(s for s in tree if s["name"] == "tandem.engine")
    verify = next(s for s in tree if s["name"] == "tandem.verify")
    rounds = [s for s in tree if s["name"] == "tandem.canvas"]
    assert verify["parent_id"] == engine["context"]["span_id"]
    assert rounds and all(c["parent_id"] == verify["context"]["span_id"] for c in rounds)
    when = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    for c in rounds:
        assert when(engine["start_time"]) <= when(c["start_time"]) < when(c["end_time"]) <= when(engine["end_time"])
    names = json.dumps(metrics)
    for metric in wanted:
        assert metric in names


def logged_entry(serve_app, request_id: str, timeout_s: float = 30.0) -> dict | None:
    """The decisions-stream entry of one request (logged off the request path: polled for)."""
    client = redis.Redis.from_url(serve_app["redis_url"], decode_responses=True)
    deadline = time.time() + timeout_s
    try:
        while time.time() < deadline:
            mine = [e for _, e in client.xrevrange(f"{serve_app['prefix']}decisions", count=50)
                    if json.loads(e["decision"])["request_id"] == request_id]
            if mine:
                return mine[0]
            time.sleep(0.1)
    finally:
        client.close()
    return None


def test_decisions_are_appended_to_the_redis_stream(base_url, serve_app):
    client = redis.Redis.from_url(serve_app["redis_url"], decode_responses=True)
    stream = f"{serve_app['prefix']}decisions"
    r = chat(base_url, model="tandem-ar")
    assert r.status_code == 200
    entry = logged_entry(serve_app, r.json()["id"], timeout_s=5)
    assert entry is not None, "the decision never reached the stream"
    decision, outcome = json.loads(entry["decision"]), json.loads(entry["outcome"])
    assert decision["mode"] == "ar"
    assert outcome["output_tokens"] == r.json()["usage"]["completion_tokens"]
    assert "text" not in entry and MSG[0]["content"] not in json.dumps(entry)  # default: no prompt text, only its features
    features = json.loads(entry["features"])
    assert features["prompt_chars"] == len(MSG[0]["content"]) and features["numeric"]["log_user_turns"] == pytest.approx(math.log1p(len(MSG)), abs=1e-4)  # one user turn (logged to 4 places)
    assert 0 < client.pttl(stream) <= 7 * 86_400_000  # entries expire
    client.close()


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two answers share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


SHADOW_SEED = 0  # a seeded block answer is reproducible (engines.types: same seed, same output, alone or batched)


def test_shadow_verification_measures_acceptance_of_block_answers_and_logs_it_for_retraining(base_url, admin_headers, serve_app, app_checkpoint):
    from engines import DiffusionEngine
    from engines.types import GenerationRequest
    from policies.stores.base import default_policy

    current = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
    shipped = default_policy().shadow_verify_rate  # policies/default.yaml's rate, which the shared app starts with
    assert current["shadow_verify_rate"] == shipped
    before = httpx.get(f"{base_url}/admin/stats", headers=admin_headers, timeout=10).json()["shadow_acceptance_rate"]
    applied = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": current | {"shadow_verify_rate": 1.0}})
    assert applied.status_code == 200, applied.text
    try:
        r = chat(base_url, model="tandem-block", max_tokens=8, seed=SHADOW_SEED)
        assert r.headers["x-tandem-mode"] == "block"
        entry = logged_entry(serve_app, r.json()["id"])  # logged after the shadow pass (orchestration._after)
        assert entry is not None, "the decision never reached the stream"
        decision, outcome = json.loads(entry["decision"]), json.loads(entry["outcome"])
        rate = httpx.get(f"{base_url}/admin/stats", headers=admin_headers, timeout=10).json()["shadow_acceptance_rate"]
    finally:
        reset = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": current})
        assert reset.status_code == 200, reset.text
        now = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
        assert now["shadow_verify_rate"] == shipped and routing_content(now) == routing_content(current)

    # The expected agreement, derived without the engine's agreement pass: the served block answer,
    # decoded again in this process (same checkpoint, seed, canvas and steps: its text must be the
    # served text), against AR's greedy answer to the same messages (its text must be what tandem-ar
    # serves). AR accepts a block token exactly while the answers agree, so the agreement is their
    # common prefix over the block answer's length. Token ids, not texts: the random model writes
    # partial UTF-8 that the served text replaces, so the texts cannot be tokenized back.
    engine = DiffusionEngine.from_checkpoint(app_checkpoint)
    canvas = min(decision["canvas"], engine.config.canvas_length)  # the gateway caps it at the engine's canvas
    block = engine.generate(GenerationRequest(messages=MSG, mode="block", max_new_tokens=8, seed=SHADOW_SEED,
                                              canvas=canvas, max_denoising_steps=decision["steps"]))
    assert block.text == r.json()["choices"][0]["message"]["content"] and len(block.token_ids) == outcome["output_tokens"]
    greedy = engine.generate(GenerationRequest(messages=MSG, mode="ar", max_new_tokens=len(block.token_ids), temperature=0.0))
    served_ar = chat(base_url, model="tandem-ar", max_tokens=len(block.token_ids), temperature=0)
    assert greedy.text == served_ar.json()["choices"][0]["message"]["content"]
    agreed = common_prefix(block.token_ids, greedy.token_ids)
    assert 0 < agreed < len(block.token_ids), f"seed {SHADOW_SEED} no longer tells a partial agreement from none or all: pick another"
    expected = round(agreed / len(block.token_ids), 4)
    assert outcome["mode"] == "block" and outcome["shadow_agreement"] == expected  # the agreement label retraining reads
    # /admin/stats pools every shadowed token of the app's life: ours alone (exact) when none came
    # before, else a token-weighted mean that lies between the earlier rate and ours
    if before is None:
        assert rate == expected
    else:
        assert min(before, expected) - 1e-4 <= rate <= max(before, expected) + 1e-4  # 1e-4: both are rounded to 4 places
