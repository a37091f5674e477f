"""Cost-aware routing: a measured cost profile and the engines' queues move a request between the
two lossless modes (verified, AR) when the other would finish it sooner."""

from __future__ import annotations

import pytest

from router.cost import CostProfile
from policies.stores import default_policy
from router import Router
from tests.router.test_decide import ESSAY, EXTRACT, policy, req

# A CPU-like profile: a canvas step costs ~4 AR steps at batch 1, ~10 at batch 8.
CPU = CostProfile(ms_per_forward={"block": {1: 24.0, 8: 86.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.5)
IDLE = {"queued": 0, "running": 0, "capacity": 8}
BUSY = {"queued": 40, "running": 8, "capacity": 8}


def test_forward_cost_interpolates_and_grows_past_the_last_measurement():
    assert CPU.forward_ms("block", 1) == 24.0
    assert CPU.forward_ms("block", 4.5) == pytest.approx(24.0 + 62.0 * 3.5 / 7)
    assert CPU.forward_ms("ar", 16) == pytest.approx(17.0)
    assert CPU.finish_ms("ar", 100, 12, 256, **BUSY) > 5 * CPU.finish_ms("ar", 100, 12, 256, **IDLE)


def test_profile_round_trips_beside_a_checkpoint(tmp_path):
    CPU.save(tmp_path)
    assert CostProfile.load(tmp_path) == CPU
    assert CostProfile.load(tmp_path / "missing") is None


@pytest.fixture
def router(model):
    def make(**load_aware) -> Router:
        modes = default_policy().content()["task_modes"] | {"write": "verified"}
        r = Router(model=model, store=policy(task_modes=modes, load_aware={"enabled": True, **load_aware}))
        r.cost = CPU
        return r

    return make


def test_a_busy_block_engine_sends_verified_work_to_an_idle_ar_engine(router):
    d = router().decide(req(ESSAY), queues={"block": BUSY, "ar": IDLE})
    assert (d.mode, d.rule, d.load_aware) == ("ar", "load", True)
    assert "ms in verified" in d.reason


def test_a_busy_ar_engine_sends_ar_work_to_verified(router, model):
    r = Router(model=model, store=policy(load_aware={"enabled": True}))  # write -> ar by default
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 6.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9)
    d = r.decide(req(ESSAY), queues={"block": IDLE, "ar": BUSY})
    assert (d.mode, d.rule) == ("verified", "load")


def test_stays_put_without_enough_gain_or_when_switched_off(router):
    assert router(min_gain=100.0).decide(req(ESSAY), queues={"block": BUSY, "ar": IDLE}).mode == "verified"
    assert router(cost_aware=False).decide(req(ESSAY), queues={"block": BUSY, "ar": IDLE}).mode == "verified"
    assert router().decide(req(ESSAY)).mode == "verified"  # no queue view: nothing to weigh


def test_forced_modes_and_block_never_move(router):
    assert router().decide(req(ESSAY, model="tandem-verified"), queues={"block": BUSY, "ar": IDLE}).mode == "verified"
    block_task = router().decide(req(EXTRACT), queues={"block": BUSY, "ar": IDLE})
    assert (block_task.mode, block_task.rule) == ("block", "task_default")  # block differs from AR: no lossless swap
