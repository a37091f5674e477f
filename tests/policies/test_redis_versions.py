"""Policy versions in Redis (policies.stores.redis_versions) against a real Redis that restarts empty:
versions only grow, whoever writes first after the restart, and no watching replica steps back."""

from __future__ import annotations

import json

import pytest

from policies import RedisStore, StaleVersionError
from policies.stores import default_policy
from tests.helpers import wait_until
from tests.policies.helpers import redis_client


def edit(policy, **changes) -> dict:
    return {**policy.content(), **changes}


def restart_empty(server) -> None:
    # A key no replica writes shows the restart emptied the server: the policy's own keys cannot, since a
    # watching replica may write its policy back within a poll of the restart (as it should).
    redis_client(server.url).set("tandem:test:before-restart", "1")
    server.stop()
    server.start()  # no persistence: the policy and its history are gone
    assert redis_client(server.url).exists("tandem:test:before-restart") == 0


def test_a_write_after_redis_restarted_empty_continues_from_the_replicas_version(private_redis):
    """Once, the first write after an empty restart was version 1 again while the replicas had
    served version 3: decisions logged under one number then meant two different policies."""
    url = private_redis.url
    replica = RedisStore(url, watch=True, poll_interval_s=0.1, backoff_s=(0.05, 0.2), socket_timeout_s=0.3)
    try:
        for steps in (14, 15, 16):
            replica.apply(edit(replica.current(), steps=steps))
        assert replica.current().version == 3
        restart_empty(private_redis)
        # the replica puts the mark back within a poll ...
        wait_until(lambda: redis_client(url).get("tandem:policy:max_version") == "3", timeout_s=5.0, what="max_version not restored")
        assert replica.current().version == 3 and replica.current().steps == 16
        # ... so the operator's CLI, a fresh process that has seen no version, continues from it
        with RedisStore(url, watch=False) as cli:
            assert cli.apply(edit(default_policy(), steps=5)).version == 4
        wait_until(lambda: replica.current().version == 4, timeout_s=2.0)
        assert replica.current().steps == 5
        assert [r.version for r in replica.history()] == [3, 4]  # 3: the replica wrote back what it served
    finally:
        replica.close()


def test_after_an_empty_restart_every_replica_converges_on_the_highest_version_served(private_redis):
    """Issue 54: after Redis restarted empty only the version mark came back; a replacement Gateway
    started on the shipped default (version 0) while the survivor served version 4, and requests
    were split between the two for good. Now the policy itself is written back under its own
    version, the highest served wins, and a replacement (and the CLI) reads it."""
    url = private_redis.url
    with RedisStore(url, watch=False) as writer:
        for steps in (14, 15, 16):
            writer.apply(edit(default_policy(), steps=steps))
    lagging = RedisStore(url, watch=False)  # a replica that reads only when asked: it served 3 and missed 4
    assert lagging.current().version == 3
    # slow to notice the restart, so the lagging replica writes its lower version back first
    survivor = RedisStore(url, watch=True, poll_interval_s=1.0, backoff_s=(0.5, 1.0), socket_timeout_s=0.3)
    try:
        with RedisStore(url, watch=False) as writer:
            writer.apply(edit(default_policy(), steps=17))
        wait_until(lambda: survivor.current().version == 4, timeout_s=3.0)
        restart_empty(private_redis)
        lagging.current()  # nothing stored: writes back the 3 it serves ...
        # ... which gives way to the survivor's 4, and the lagging replica follows
        wait_until(lambda: _stored(url) == (4, 17) and lagging.current().version == 4, timeout_s=5.0, what="the survivor's version 4 stored and the lagging replica on it")
        assert survivor.current().version == 4
        assert [(r.version, r.note.split(":")[0]) for r in lagging.history()] == [(3, "written back"), (4, "written back")]
        replacement = RedisStore(url, watch=False)  # a new Gateway after the restart: never older than a live one
        assert (replacement.current().version, replacement.current().steps) == (4, 17)
        replacement.close()
        with RedisStore(url, watch=False) as cli:  # `tandem policy show` agrees with what requests are served under
            assert cli.current().version == 4 and cli.apply(edit(default_policy(), steps=5)).version == 5
        wait_until(lambda: survivor.current().version == 5 and lagging.current().version == 5, timeout_s=3.0)
    finally:
        survivor.close()
        lagging.close()


def _stored(url: str) -> tuple[int, int] | None:
    raw = redis_client(url).get("tandem:policy:current")
    return None if raw is None else (json.loads(raw)["version"], json.loads(raw)["steps"])


def test_a_replica_writing_after_an_empty_restart_continues_from_what_it_served(private_redis):
    url = private_redis.url
    with RedisStore(url, watch=False) as replica:
        replica.apply(edit(replica.current(), steps=14))
        replica.apply(edit(replica.current(), steps=15))
        restart_empty(private_redis)
        with pytest.raises(StaleVersionError) as exc:  # what it serves (2) counts as current, not 0
            replica.apply(edit(default_policy(), steps=3), expect_version=0)
        assert exc.value.actual == 2
        stored = replica.apply(edit(default_policy(), steps=3), expect_version=2)  # the admin API's GET showed 2
        assert stored.version == 3
        assert json.loads(redis_client(url).get("tandem:policy:current"))["version"] == 3


def test_a_lower_version_written_before_the_mark_is_back_is_renumbered_not_served(private_redis):
    """A write that lands after the restart but before any replica re-read Redis gets version 1;
    the replica that served 2 writes the same content again as version 3 and serves that."""
    url = private_redis.url
    with RedisStore(url, watch=False) as replica:  # not watching: it reads only when asked
        replica.apply(edit(replica.current(), steps=14))
        replica.apply(edit(replica.current(), steps=15))
        restart_empty(private_redis)
        with RedisStore(url, watch=False) as cli:
            early = cli.apply(edit(default_policy(), steps=7), note="after the restart")
        assert early.version == 1  # nothing in Redis could tell the CLI otherwise
        served = replica.current()
        assert (served.version, served.steps) == (3, 7)
        assert json.loads(redis_client(url).get("tandem:policy:current"))["version"] == 3
        hist = replica.history()
        assert [r.version for r in hist] == [1, 3] and "renumbered" in hist[-1].note
        assert hist[0].policy == hist[1].policy
        with RedisStore(url, watch=False) as later:
            assert later.current().version == 3 and later.apply(edit(served, steps=8)).version == 4


def test_watching_replicas_never_step_back_a_version(private_redis):
    url = private_redis.url
    replicas = [RedisStore(url, watch=True, poll_interval_s=0.05, backoff_s=(0.02, 0.1), socket_timeout_s=0.3) for _ in range(3)]
    served = {k: [] for k in range(len(replicas))}
    for k, r in enumerate(replicas):
        r.listeners.append(lambda p, k=k: served[k].append(p.version))
    try:
        with RedisStore(url, watch=False) as writer:
            for steps in (14, 15, 16, 17):
                writer.apply(edit(default_policy(), steps=steps))
        wait_until(lambda: all(r.current().version == 4 for r in replicas), timeout_s=3.0)
        private_redis.stop()
        private_redis.start()
        with RedisStore(url, watch=False, socket_timeout_s=0.3) as cli:  # at once, racing the replicas' reconnect
            cli.apply(edit(default_policy(), steps=9))
        # a replica's listeners run just after its current() changes (on its watch thread): wait for both
        wait_until(lambda: all(r.current().steps == 9 and r.status()["healthy"] and served[k][-1:] == [5] for k, r in enumerate(replicas)),
                   timeout_s=5.0, what=f"every replica on steps 9, version 5 served: {served}")
        versions = {r.current().version for r in replicas}
        assert versions == {5}, versions
        for seq in served.values():
            assert seq == sorted(seq) and seq[-1] == 5, served
        assert json.loads(redis_client(url).get("tandem:policy:current"))["version"] == 5
    finally:
        for r in replicas:
            r.close()
