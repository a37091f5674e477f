"""Cost-aware routing: a measured cost profile and the engines' queues move a request to a mode of
equal quality that would finish it sooner: between the lossless modes (verified, AR) always, and
between block and AR for the tasks the policy lists as equal in quality."""

from __future__ import annotations

import pytest

from router.cost import CostProfile
from policies.schema import DEFAULT_TASK_MODES
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


# Per-canvas block costs: a 64-token canvas step is far cheaper than a 256-token one.
BY_CANVAS = CostProfile(
    ms_per_forward=CPU.ms_per_forward, canvas=256, acceptance=0.5,
    block_ms_by_canvas={64: {1: 8.0, 8: 30.0}, 128: {1: 14.0, 8: 55.0}, 256: {1: 24.0, 8: 86.0}},
)


def test_block_cost_follows_the_canvas_when_measured_per_canvas():
    assert BY_CANVAS.forward_ms("block", 1, canvas=64) == 8.0
    assert BY_CANVAS.forward_ms("block", 1, canvas=96) == pytest.approx(11.0)
    assert BY_CANVAS.forward_ms("block", 8, canvas=32) == 30.0  # below the smallest: its cost
    assert BY_CANVAS.forward_ms("block", 1, canvas=512) == pytest.approx(48.0)  # past the largest: grows with it
    assert BY_CANVAS.forward_ms("block", 1) == CPU.forward_ms("block", 1)  # no canvas: the full-canvas figures
    assert BY_CANVAS.finish_ms("block", 40, 12, 64, **IDLE) < CPU.finish_ms("block", 40, 12, 64, **IDLE)


def test_profile_round_trips_beside_a_checkpoint(tmp_path):
    CPU.save(tmp_path)
    assert CostProfile.load(tmp_path) == CPU
    BY_CANVAS.save(tmp_path)
    assert CostProfile.load(tmp_path) == BY_CANVAS
    assert CostProfile.load(tmp_path / "missing") is None


@pytest.fixture
def router(model):
    def make(**load_aware) -> Router:
        modes = dict(DEFAULT_TASK_MODES) | {"write": "verified"}
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


def test_block_and_ar_trade_places_only_for_tasks_of_equal_quality(model):
    def make(equal: list[str]) -> Router:
        r = Router(model=model, store=policy(load_aware={"enabled": True, "equal_quality_tasks": equal}))
        r.cost = BY_CANVAS
        return r

    # extract defaults to block; with a busy block engine and extract listed, AR finishes it sooner
    moved = make(["extract"]).decide(req(EXTRACT), queues={"block": BUSY, "ar": IDLE})
    assert (moved.mode, moved.rule, moved.load_aware, moved.canvas) == ("ar", "load", True, None)
    assert "ms in block" in moved.reason
    # not listed: block's answers differ from AR's in quality, so it stays
    assert make([]).decide(req(EXTRACT), queues={"block": BUSY, "ar": IDLE}).mode == "block"
    # idle engines: a 64-token canvas beats ~40 AR steps on this profile, so block keeps it
    assert make(["extract"]).decide(req(EXTRACT), queues={"block": IDLE, "ar": IDLE}).mode == "block"
    # write defaults to AR; listed and with a busy AR engine it moves to block (the fastest equal mode)
    essay = make(["write"]).decide(req(ESSAY), queues={"block": IDLE, "ar": BUSY})
    assert essay.mode == "block" and essay.canvas is not None


def test_equal_quality_tasks_must_be_known_task_types():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown task type"):
        policy(load_aware={"equal_quality_tasks": ["poetry"]})


def test_verified_cost_uses_the_tasks_measured_acceptance(model):
    def make(**profile) -> Router:
        modes = dict(DEFAULT_TASK_MODES) | {"write": "verified"}
        r = Router(model=model, store=policy(task_modes=modes, load_aware={"enabled": True}))
        r.cost = CostProfile(ms_per_forward=CPU.ms_per_forward, canvas=256, **profile)
        return r

    # drafts that are rarely accepted make verified far slower than AR; well-accepted ones do not
    assert make(acceptance=0.01).decide(req(ESSAY), queues={"block": IDLE, "ar": IDLE}).mode == "ar"
    assert make(acceptance=0.01, acceptance_by_task={"write": 0.9}).decide(req(ESSAY), queues={"block": IDLE, "ar": IDLE}).mode == "verified"


def test_the_gateways_queue_view_counts_its_own_requests_in_flight():
    """The engines' load is polled every 0.5 s; requests the gateway dispatched since count at once,
    so a burst does not all land on the engine that looked idle at the last poll."""
    from router.gateway import Gateway

    gw = Gateway(None, None)
    gw.queues = {"ar": {"queued": 0, "running": 0, "capacity": 8}, "block": {"queued": 1, "running": 8, "capacity": 8}}
    gw.in_flight = {"ar": 11, "block": 2}
    view = gw._queue_view()
    assert view["ar"] == {"queued": 3, "running": 8, "capacity": 8}  # 11 dispatched: 8 running, 3 waiting
    assert view["block"] == {"queued": 1, "running": 8, "capacity": 8}  # the poll saw more than we sent
