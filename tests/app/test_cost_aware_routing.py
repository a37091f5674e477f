"""Cost-aware routing through the real app: labels the policy sends to AR move to the block engine
while AR has more work ahead than the cost profile says a label could wait through, and come back
to AR when that load ends. Nothing is injected: the load is real requests, the routing view is the
gateway's own, and the policy is written and rolled back through the admin API."""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from tests.helpers import wait_until

LABEL = [{"role": "user", "content": "Classify the sentiment of this review as positive, negative or neutral: battery died in an hour."}]
GUARD_S = 60.0  # deadlock guard for each wait below (each took seconds here)
MOVED_GUARD_S = 150.0  # the wait for a moved label: a try that lands between waves waits behind AR's long answers
LOAD_ROWS = 8  # concurrent long AR requests: the engine's batch of 4, and 4 queued behind it
LOAD_TOKENS = 512
# A near-greedy sample (just over engines.decode.sampling.GREEDY_BELOW): one token per AR step, as prompt
# lookup would write the random model's greedy loops in a few passes.
# `ignore_eos`: every answer as long as asked (sampled, the random model now and then stops early).
STORY = {"messages": [{"role": "user", "content": "Tell me a long story."}], "temperature": 2e-4, "ignore_eos": True}


def label(base_url: str) -> httpx.Response:
    r = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem", "messages": LABEL, "max_tokens": 8}, timeout=60,
                   headers={"x-request-id": f"label-{uuid.uuid4().hex}"})
    assert r.status_code == 200, r.text
    return r


def dry_run(base_url: str, admin_headers: dict) -> dict:
    r = httpx.post(f"{base_url}/admin/route", json={"model": "tandem", "messages": LABEL, "max_tokens": 8}, headers=admin_headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def stats(base_url: str, admin_headers: dict) -> dict:
    r = httpx.get(f"{base_url}/admin/stats", headers=admin_headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def logged(base_url: str, admin_headers: dict, response: httpx.Response) -> dict:
    """The decision /admin/decisions shows for the request that got `response`."""
    request_id = response.headers["x-request-id"]
    r = httpx.get(f"{base_url}/admin/decisions", headers=admin_headers, timeout=30)
    assert r.status_code == 200, r.text
    (entry,) = [d for d in r.json()["decisions"] if d["request_id"] == request_id]
    return entry


def wait_for(predicate, what: str, guard_s: float = GUARD_S):
    """tests.helpers.wait_until on a truthy value, at this file's guard."""
    return wait_until(predicate, timeout_s=guard_s, interval_s=0.1, what=what)


class ARLoad:
    """LOAD_ROWS clients sending long forced-AR requests back to back (forced: routing never moves
    them), and one sending short forced-block labels: under load the router moves a request to a
    mode only once that mode's engine has answered requests at its present load (`known` in
    `Router.faster_at_equal_quality`), as live traffic would have it."""

    def __init__(self, base_url: str):
        self.base_url, self.stop, self.errors = base_url, threading.Event(), []
        long_ar = STORY | {"model": "tandem-ar", "max_tokens": LOAD_TOKENS}
        short_block = {"model": "tandem-block", "messages": LABEL, "max_tokens": 8}
        self.threads = [threading.Thread(target=self._loop, args=(long_ar,), daemon=True) for _ in range(LOAD_ROWS)]
        self.threads.append(threading.Thread(target=self._loop, args=(short_block,), daemon=True))

    def _loop(self, body: dict) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set():
                r = client.post(f"{self.base_url}/v1/chat/completions", json=body)
                if r.status_code != 200:
                    self.errors.append(r.text[:200])

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=GUARD_S)


@pytest.fixture
def label_policy(base_url, admin_headers):
    """Labels on AR (as shipped), cost-aware routing free to move them to the block engine (block
    counts as AR's quality for labels here, no agreement veto, no queue spill), two denoising steps a
    canvas: an idle AR is the profile's fastest way to a label (8 tokens in 8 AR steps against a
    canvas's 3 block forwards). Rolled back to the policy the app had after the test."""
    start = httpx.get(f"{base_url}/admin/policy", headers=admin_headers).json()["policy"]
    baseline = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": start, "expect_version": start["version"], "note": "test: baseline"})
    assert baseline.status_code == 200, baseline.text
    known = baseline.json()["version"]
    # min_gain 2: at idle the live calibration of each engine (observed / profile time) drifts with
    # what the machine and earlier tests did (on two busy test workers, enough to price a block label
    # 1.25x sooner than an idle AR once); under the load below AR is priced behind a queue of 512-token answers.
    la = start["load_aware"] | {"enabled": True, "cost_aware": True, "min_gain": 2.0, "max_queue_ratio": 1.0,
                                "equal_quality_tasks": sorted(set(start["load_aware"]["equal_quality_tasks"]) | {"classify"})}
    labels = start | {"task_modes": start["task_modes"] | {"classify": "ar"}, "agreement_floor": 0.0,
                      "steps_by_task": start["steps_by_task"] | {"classify": 2}, "load_aware": la, "description": "test: labels on AR, cost-aware"}
    applied = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, json={"policy": labels, "expect_version": known})
    assert applied.status_code == 200, applied.text
    yield applied.json()["version"]
    back = httpx.post(f"{base_url}/admin/policy/rollback", headers=admin_headers, json={"version": known})
    assert back.status_code == 200, back.text


# the guards' sum (5 x 60 s + 150 s), so a slow wait fails with its own message, not pytest-timeout's
@pytest.mark.timeout(480)
def test_requests_move_to_another_mode_under_load(base_url, admin_headers, label_policy):
    # idle: the policy's mode, not moved
    wait_for(lambda: (e := stats(base_url, admin_headers)["engines"])["ar"]["running"] + e["ar"]["queued"] == 0, "AR idles")
    idle = label(base_url)
    assert (idle.headers["x-tandem-mode"], idle.headers["x-tandem-task"], idle.headers["x-tandem-policy-version"]) == ("ar", "classify", str(label_policy)), (
        idle.headers.get("x-tandem-route-reason"), stats(base_url, admin_headers)["routing"])
    assert idle.headers["x-tandem-route-reason"] != "load"

    with ARLoad(base_url) as load:
        decided = wait_for(lambda: (d := dry_run(base_url, admin_headers))["rule"] == "load" and d, "the label is moved off the loaded AR engine")
        assert decided["mode"] in ("block", "verified") and f"moved to {decided['mode']}" in decided["reason"], decided

        def moved() -> httpx.Response | None:
            """The load comes in waves (each request ends, the next starts): send a label while the
            dry run says it moves, until one is served moved. A label sent between waves goes to AR
            and waits behind the long answers there (tens of seconds on a busy machine), so each try
            first asks the dry run, and the guard allows several such waits."""
            if dry_run(base_url, admin_headers)["rule"] != "load":
                return None
            r = label(base_url)
            return r if r.headers["x-tandem-route-reason"] == "load" else None

        r = wait_for(moved, "a label request served in another mode under load", guard_s=MOVED_GUARD_S)
        during = stats(base_url, admin_headers)
        assert not load.errors, load.errors[:3]
    assert r.headers["x-tandem-mode"] in ("block", "verified") and r.headers["x-tandem-task"] == "classify"
    entry = logged(base_url, admin_headers, r)
    assert (entry["mode"], entry["rule"]) == (r.headers["x-tandem-mode"], "load") and "vs" in entry["reason"], entry
    assert during["engines"]["ar"]["running"] + during["engines"]["ar"]["queued"] > 0, during["engines"]  # AR was loaded

    # the load is over: once the AR engine and the gateway's view of it idle again, labels go back to AR
    wait_for(lambda: (e := stats(base_url, admin_headers))["engines"]["ar"]["running"] + e["engines"]["ar"]["queued"] == 0
             and e["routing"]["in_flight"]["ar"] == 0, "the AR engine idles")
    wait_for(lambda: dry_run(base_url, admin_headers)["mode"] == "ar", "the label routes to AR again")
    back = label(base_url)
    assert (back.headers["x-tandem-mode"], back.headers["x-tandem-task"]) == ("ar", "classify")
    assert back.headers["x-tandem-route-reason"] != "load" and logged(base_url, admin_headers, back)["mode"] == "ar"
