"""The console's feed of recent decisions: bounded, ordered, read after a position per replica
(GET /admin/decisions on the real FastAPI app and Gateway, in-process, no engines)."""

from __future__ import annotations

import asyncio
import shutil

import httpx

from router.gateway.decision_feed import DecisionFeed


def test_the_feed_keeps_the_newest_entries_in_order_and_reads_after_a_position():
    feed = DecisionFeed(size=3)
    seqs = [feed.add({"mode": m}) for m in ("block", "ar", "verified", "ar", "block")]
    assert seqs == [1, 2, 3, 4, 5] and feed.last == 5
    assert [e["seq"] for e in feed.after(0)] == [3, 4, 5]  # only the newest `size` are kept
    assert [e["mode"] for e in feed.after(3)] == ["ar", "block"]
    assert feed.after(5) == [] and [e["seq"] for e in feed.after(0, limit=1)] == [5]
    assert all(e["ts"] > 0 for e in feed.after(0))


def test_admin_decisions_answers_this_replicas_entries_after_the_position_the_console_sends(tmp_path, monkeypatch):
    from policies.stores import DEFAULT_POLICY_PATH
    from router.gateway.orchestration import Gateway, replica_gateway
    from router.gateway.ingress import api

    monkeypatch.setenv("TANDEM_TEST_FEED_TOKEN", "feed-token")
    policy = tmp_path / "policy.yaml"
    shutil.copy(DEFAULT_POLICY_PATH, policy)
    gw = Gateway(None, None, policy_source=str(policy), admin_token_env="TANDEM_TEST_FEED_TOKEN")
    for task in ("classify", "extract", "plan"):
        gw.feed.add({"task": task, "status": 200})
    api.dependency_overrides[replica_gateway] = lambda: gw
    auth = {"Authorization": "Bearer feed-token"}

    async def calls():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://gateway") as client:
            return [await client.get("/admin/decisions", params=params, headers=auth) for params in (
                {}, {"after": f"{gw.feed.id}:1"}, {"after": f"otherreplica:2,{gw.feed.id}:3"}, {"after": "otherreplica:2"},
                {"after": "nonsense"}, {"limit": 0})] + [await client.get("/admin/decisions")]

    try:
        everything, after_one, after_all, other_replica, bad, bad_limit, no_token = asyncio.run(calls())
    finally:
        api.dependency_overrides.pop(replica_gateway, None)
    assert everything.json()["feed"] == gw.feed.id and everything.json()["last"] == 3
    assert [d["task"] for d in everything.json()["decisions"]] == ["classify", "extract", "plan"]
    assert [d["task"] for d in after_one.json()["decisions"]] == ["extract", "plan"]
    assert after_all.json()["decisions"] == []
    assert len(other_replica.json()["decisions"]) == 3  # a position for another replica's feed says nothing about this one
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "after"
    assert bad_limit.status_code == 400
    assert no_token.status_code == 401
