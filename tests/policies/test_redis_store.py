"""The Redis store against a real Redis: compare-and-set, history, rollback, refusal of invalid
policies, hot reload across instances and processes, and serving through an outage."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from policies import PolicyValidationError, RedisStore, StaleVersionError
from policies.errors import PolicyNotFoundError, PolicyStoreUnavailableError
from policies.stores import default_policy
from tests.helpers import wait_until
from tests.policies.helpers import free_port, redis_client

ROOT = Path(__file__).resolve().parents[2]


def edit(policy, **changes) -> dict:
    return {**policy.content(), **changes}


@pytest.fixture
def store(redis_url, prefix):
    s = RedisStore(redis_url, prefix=prefix, watch=False)
    yield s
    s.close()


def test_empty_redis_serves_the_bootstrap_policy(store):
    assert store.current() == default_policy()
    assert store.status()["healthy"] is True and store.history() == []


def test_apply_stores_current_history_and_publishes(store, redis_url, prefix):
    client = redis_client()
    ps = client.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(f"{prefix}policy:updates")
    p1 = store.apply(edit(store.current(), steps=16), expect_version=0, note="first")
    assert p1.version == 1
    assert json.loads(client.get(f"{prefix}policy:current"))["version"] == 1
    msg = wait_until(lambda: ps.get_message(timeout=0.1), timeout_s=2.0)
    assert json.loads(msg["data"]) == {"version": 1}
    assert [(r.version, r.note) for r in store.history()] == [(1, "first")]
    ps.close()
    client.close()


def test_compare_and_set_refuses_a_stale_version(store, redis_url, prefix):
    other = RedisStore(redis_url, prefix=prefix, watch=False)
    try:
        store.apply(edit(store.current(), steps=16), expect_version=0)
        with pytest.raises(StaleVersionError) as exc:
            other.apply(edit(default_policy(), steps=4), expect_version=0)
        assert (exc.value.expected, exc.value.actual) == (0, 1)
        assert store.current().steps == 16 and other.current().steps == 16
    finally:
        other.close()


def test_concurrent_writers_expecting_the_same_version_one_wins(redis_url, prefix):
    stores = [RedisStore(redis_url, prefix=prefix, watch=False) for _ in range(4)]
    results = []
    barrier = threading.Barrier(len(stores))

    def write(s, steps):
        barrier.wait()
        try:
            results.append(s.apply(edit(default_policy(), steps=steps), expect_version=0).version)
        except StaleVersionError:
            results.append("stale")

    threads = [threading.Thread(target=write, args=(s, 10 + k)) for k, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert sorted(results, key=str) == [1, "stale", "stale", "stale"]


def test_invalid_policy_is_refused_before_redis_changes(store, prefix):
    store.apply(edit(store.current(), steps=16))
    client = redis_client()
    before = client.get(f"{prefix}policy:current")
    with pytest.raises(PolicyValidationError) as exc:
        store.apply(edit(store.current(), steps=0, canvas_sizes=[256, 64]))
    assert {e.split(":")[0] for e in exc.value.errors} == {"steps", "canvas_sizes"}
    assert client.get(f"{prefix}policy:current") == before
    assert len(store.history()) == 1
    client.close()


def test_rollback_creates_a_new_version_with_old_content(store):
    store.apply(edit(store.current(), steps=16))
    store.apply(edit(store.current(), steps=24, confidence_floor=0.9))
    back = store.rollback(1)
    assert back.version == 3 and back.steps == 16 and back.confidence_floor == 0.5
    assert [r.version for r in store.history()] == [1, 2, 3]
    assert store.history()[-1].note == "rollback to 1"
    with pytest.raises(PolicyNotFoundError):
        store.rollback(99)
    with pytest.raises(StaleVersionError):
        store.rollback(2, expect_version=1)


def test_rollback_to_version_0_restores_the_shipped_default(store):
    """Version 0 is the shipped default, served before any write: no history holds it, yet it can be
    restored (it was a 404 before)."""
    store.apply(edit(store.current(), steps=24, confidence_floor=0.9))
    back = store.rollback(0)
    assert back.version == 2 and back.content() == default_policy().content()
    assert store.history()[-1].note == "rollback to 0 (the shipped default)"


def test_invalid_json_written_behind_the_stores_back_keeps_last_good(redis_url, prefix):
    s = RedisStore(redis_url, prefix=prefix, watch=True, poll_interval_s=0.1)
    try:
        s.apply(edit(s.current(), steps=16))
        client = redis_client()
        client.set(f"{prefix}policy:current", json.dumps({"version": 2, "steps": -5}))
        wait_until(lambda: s.status()["invalid_total"] >= 1, timeout_s=2.0)
        assert s.current().version == 1 and s.current().steps == 16
        client.close()
    finally:
        s.close()


def subscribed(channel: str) -> bool:
    """Redis's own count of the channel's subscribers: the watcher has subscribed."""
    client = redis_client()
    try:
        return dict(client.pubsub_numsub(channel)).get(channel, 0) >= 1
    finally:
        client.close()


# Deadlock guards, not measured claims: far beyond what a loaded machine needs, far below NO_POLL_S,
# so a reload seen at all came through the published update.
PUSH_WAIT_S = 20.0
NO_POLL_S = 3600.0  # the watcher's poll period in these tests: it never polls while they run


def test_second_instance_reloads_on_the_published_update_not_on_a_poll(redis_url, prefix):
    """The reader never polls (NO_POLL_S), so only the write's pub/sub message can reload it. Once
    the reader has served version 1 its watcher has subscribed and done its first read (nothing
    else can have loaded a version the test wrote after the reader started); version 2 can
    then reach it only by the message."""
    writer = RedisStore(redis_url, prefix=prefix, watch=False)
    reader = RedisStore(redis_url, prefix=prefix, watch=True, poll_interval_s=NO_POLL_S)
    try:
        wait_until(lambda: subscribed(reader.channel), timeout_s=PUSH_WAIT_S, what="the watcher never subscribed")
        writer.apply(edit(writer.current(), steps=33))
        wait_until(lambda: reader.current().version == 1, timeout_s=PUSH_WAIT_S)
        reloads = reader.status()["reloads_total"]
        writer.apply(edit(writer.current(), steps=34))
        wait_until(lambda: reader.current().steps == 34, timeout_s=PUSH_WAIT_S, what="the published update was not read")
        assert reader.current().version == 2 and reader.status()["reloads_total"] == reloads + 1
    finally:
        writer.close()
        reader.close()


def test_policy_applied_in_one_process_changes_decisions_of_another(redis_url, prefix):
    """A subprocess routes the same request in a loop with a Router on the Redis store (never
    polling). This process writes version 1 (a description only) and waits until the subprocess
    serves it: its watcher has subscribed and done its first read. Version 2 changes the mode for
    the request's task type, and can reach the subprocess only by the published update."""
    script = textwrap.dedent(
        f"""
        import sys, time, json
        sys.path.insert(0, {str(ROOT)!r})
        from router.decision.decide import Router
        from router.decision.types import RouteRequest
        router = Router(policy_source={redis_url!r}, prefix={prefix!r}, poll_interval_s={NO_POLL_S})
        req = RouteRequest.from_prompt("Classify the sentiment of this review as positive, negative or neutral: battery died in an hour.")
        print("ready", router.decide(req).mode, flush=True)
        end, seen = time.monotonic() + {PUSH_WAIT_S}, 0
        while time.monotonic() < end and seen < 2:
            d = router.decide(req)
            if d.policy_version > seen:
                seen = d.policy_version
                print("serving", d.mode, d.policy_version, flush=True)
            time.sleep(0.005)
        router.close()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    writer = RedisStore(redis_url, prefix=prefix, watch=False)
    try:
        first = proc.stdout.readline().split()
        assert first[:2] == ["ready", "ar"], first  # the shipped policy: labels on AR
        wait_until(lambda: subscribed(f"{prefix}policy:updates"), timeout_s=PUSH_WAIT_S, what="the subprocess never subscribed")
        p = writer.apply(edit(writer.current(), description="the subprocess's watcher is reading"))
        assert proc.stdout.readline().split() == ["serving", "ar", "1"]  # each readline ends by PUSH_WAIT_S at most
        writer.apply(edit(p, task_modes={**p.task_modes, "classify": "block"}))
        assert proc.stdout.readline().split() == ["serving", "block", "2"]
    finally:
        writer.close()
        proc.kill()
        proc.wait()


def test_unreachable_redis_serves_bootstrap_and_reports_it():
    port = free_port()  # nothing listens here
    s = RedisStore(f"redis://127.0.0.1:{port}/0", watch=True, backoff_s=(0.05, 0.2), socket_timeout_s=0.2)
    try:
        assert s.current() == default_policy()
        wait_until(lambda: s.status()["connection_errors_total"] >= 2, timeout_s=3.0)  # keeps retrying
        st = s.status()
        assert st["healthy"] is False and "Error" in st["last_error"]
        with pytest.raises(PolicyStoreUnavailableError) as exc:
            s.apply(default_policy())
        assert exc.value.status == 503
    finally:
        s.close()


def test_outage_keeps_last_good_policy_then_reconnects(private_redis, caplog):
    url = private_redis.url
    s = RedisStore(url, watch=True, poll_interval_s=0.2, backoff_s=(0.05, 0.3), socket_timeout_s=0.3)
    try:
        s.apply(edit(s.current(), steps=21))
        assert s.current().version == 1
        private_redis.stop()
        wait_until(lambda: not s.status()["healthy"], timeout_s=3.0, what="outage not noticed")
        assert s.current().version == 1 and s.current().steps == 21  # still serving
        assert any("unreachable" in r.getMessage() for r in caplog.records)
        private_redis.start()  # empty again (no persistence): the store keeps v1 until told otherwise
        wait_until(lambda: s.status()["healthy"], timeout_s=5.0, what="did not reconnect")
        assert s.status()["reconnects_total"] >= 1 and s.current().steps == 21
        other = RedisStore(url, watch=False)
        other.apply(edit(default_policy(), steps=5))
        other.close()
        wait_until(lambda: s.current().steps == 5, timeout_s=2.0, what="no reload after reconnect")
    finally:
        s.close()


def test_a_password_in_the_url_never_reaches_logs_errors_or_status(caplog):
    from policies.errors import PolicyStoreUnavailableError
    from policies.stores import load_store
    from tests.policies.helpers import free_port

    secret = "pw-" + "s3cret-for-the-test"
    with caplog.at_level("DEBUG"):
        store = load_store(f"redis://:{secret}@127.0.0.1:{free_port()}/0", watch=False)  # nothing listens there
        shown = [store.describe(), str(store.status())]
        with pytest.raises(PolicyStoreUnavailableError) as info:
            store.apply(store.current().content())
        shown.append(info.value.message)
        store.close()
    shown += [r.getMessage() for r in caplog.records]
    assert all(secret not in text for text in shown), [t for t in shown if secret in t]
    assert any("***@127.0.0.1" in text for text in shown)


def test_the_password_can_come_from_the_environment_instead_of_the_url(monkeypatch, caplog):
    """A password in serve_config.yaml's `policy_source` is printed by Ray when it deploys the app;
    TANDEM_REDIS_PASSWORD in the environment of `ray start` keeps it out of every URL. The store, the
    gateway's decision log, retraining and `tandem doctor` all connect through one client factory."""
    from policies.stores import load_store
    from policies.stores.base import REDIS_PASSWORD_ENV, redis_client
    from tests.policies.helpers import PrivateRedis

    secret = "pw-" + "from-the-environment"
    server = PrivateRedis(password=secret)
    server.start()
    try:
        with pytest.raises(Exception, match="(?i)auth"):
            redis_client(server.url, socket_timeout=1).ping()  # the URL alone is refused
        monkeypatch.setenv(REDIS_PASSWORD_ENV, secret)
        assert redis_client(server.url, socket_timeout=1).ping()
        with caplog.at_level("DEBUG"), load_store(server.url, watch=False, prefix="envpw:") as store:
            applied = store.apply(store.current().content())
            assert store.current().version == applied.version
        assert all(secret not in r.getMessage() for r in caplog.records)
    finally:
        server.close()


def test_the_decision_log_follows_a_policy_source_given_by_environment(redis_url, prefix, monkeypatch):
    """Once, only `args.policy_source` turned the log on: 0 entries after 600 requests."""
    from router.gateway.orchestration import Gateway

    monkeypatch.setenv("TANDEM_POLICY_SOURCE", redis_url)
    gw = Gateway(None, None, key_prefix=prefix)
    assert gw.redis is not None and gw.decisions_stream == f"{prefix}decisions"
    gw.router.close()
