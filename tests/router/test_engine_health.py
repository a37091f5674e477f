"""EngineHealth: when an engine counts as down, when it is back, and who hears of it."""

from __future__ import annotations

import asyncio

from ray.exceptions import ActorDiedError

from router.decision.engine_health import EngineHealth, replica_died


def test_a_failed_probe_right_after_a_replica_died_marks_the_engine_down_and_wakes_the_waiters():
    async def scenario():
        health = EngineHealth(["block", "ar"])
        waiting = health.went_down("ar")
        health.died("ar")
        assert health.wake.is_set(), "a death must make the poller probe at once"
        assert not health.is_down("ar"), "a death alone is not down: another replica may answer the probe"
        health.probed("ar", ok=False)
        assert health.is_down("ar") and not health.is_down("block")
        assert waiting.done(), "requests waiting on the engine hear that it went down"
        assert health.went_down("ar").done(), "a request that starts waiting now hears it at once"
        health.wake.clear()
        health.died("ar")  # the next probe of a gone deployment fails at once again
        assert not health.wake.is_set(), "an engine already down is probed at the poll interval, not in a busy loop"
        health.probed("ar", ok=True)
        assert not health.is_down("ar")
        assert not health.went_down("ar").done(), "back up: a fresh future for the next outage"
        assert health.snapshot()["ar"] == {"down": False, "down_for_s": None, "failed_probes": 0, "times_down": 1}

    asyncio.run(scenario())


def test_a_probe_that_answers_after_a_death_keeps_the_engine_up():
    async def scenario():
        health = EngineHealth(["block"])
        health.died("block")  # one replica of several died
        health.probed("block", ok=True)  # another one answered
        health.probed("block", ok=False)  # a slow probe later: no death since the last answer
        assert not health.is_down("block")

    asyncio.run(scenario())


def test_failed_probes_without_a_death_never_mean_down():
    """A busy engine answers a probe late (or not at all) for as long as it is busy: that is never
    a dead engine. Only a probe that fails soon after an actor-death error is."""
    async def scenario():
        health = EngineHealth(["block"], death_window_s=5.0)
        waiting = health.went_down("block")
        for _ in range(100):
            health.probed("block", ok=False)
        assert not health.is_down("block") and not waiting.done()
        assert health.snapshot()["block"] == {"down": False, "down_for_s": None, "failed_probes": 100, "times_down": 0}
        health.died("block")
        health.probed("block", ok=False)
        assert health.is_down("block") and waiting.done()

    asyncio.run(scenario())


def test_a_failed_probe_long_after_a_death_is_not_down():
    async def scenario():
        health = EngineHealth(["ar"], death_window_s=0.0)  # the death is already outside its window
        health.died("ar")
        await asyncio.sleep(0.01)
        health.probed("ar", ok=False)
        assert not health.is_down("ar")

    asyncio.run(scenario())


def test_only_rays_actor_death_errors_count_as_a_dead_replica():
    assert replica_died(ActorDiedError())
    assert not replica_died(RuntimeError("boom"))
    assert not replica_died(asyncio.TimeoutError())


def test_a_probe_that_fails_when_ray_holds_none_of_its_replicas_is_a_death():
    """A replica killed while idle gives no call a death error; Ray's registry says it is gone."""
    async def scenario():
        health = EngineHealth(["ar"])
        health.answered_by("ar", "SERVE_REPLICA::tandem#AREngine#a")
        health.answered_by("ar", "SERVE_REPLICA::tandem#AREngine#b")
        assert not health.gone("ar", None), "Ray could not say: not a death"
        assert not health.gone("ar", {"SERVE_REPLICA::tandem#AREngine#a": False, "SERVE_REPLICA::tandem#AREngine#b": True})
        assert health.replicas["ar"] == ["SERVE_REPLICA::tandem#AREngine#b"], "the dead one is forgotten, the live one kept"
        assert health.gone("ar", {"SERVE_REPLICA::tandem#AREngine#b": False})
        health.answered_by("ar", "SERVE_REPLICA::tandem#AREngine#c")  # the replacement
        assert health.replicas["ar"] == ["SERVE_REPLICA::tandem#AREngine#c"]

    asyncio.run(scenario())

