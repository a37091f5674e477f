"""Cost-aware routing: a measured cost profile and the engines' queues move a request to a mode of
equal quality that would finish it sooner: between the lossless modes (verified, AR) always, and
between block and AR for the tasks the policy lists as equal in quality."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from engines.cost import CostProfile
from policies.schema import DEFAULT_TASK_MODES
from router import Router
from engines.types import EngineLoad, GenerationRequest
from router.decision.live_costs import DraftKey
from router.decision.engine_view import EngineView
from router.decision.routing_view import RoutingView
from tests.helpers import ManualClock
from tests.router.helpers import CPU, ESSAY, EXTRACT, LABEL, policy, req

IDLE = EngineView(queued=0, running=0, capacity=8)
BUSY = EngineView(queued=40, running=8, capacity=8)


def occupancy(v: EngineView) -> dict:
    return {"queued": v.queued, "running": v.running, "capacity": v.capacity}


def test_forward_cost_interpolates_and_grows_past_the_last_measurement():
    assert CPU.forward_ms("block", 1) == 24.0
    assert CPU.forward_ms("block", 4.5) == pytest.approx(24.0 + 62.0 * 3.5 / 7)
    assert CPU.forward_ms("ar", 16) == pytest.approx(17.0)
    assert CPU.finish_ms("ar", 100, 12, 256, **occupancy(BUSY)) > 5 * CPU.finish_ms("ar", 100, 12, 256, **occupancy(IDLE))


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
    assert BY_CANVAS.finish_ms("block", 40, 12, 64, **occupancy(IDLE)) < CPU.finish_ms("block", 40, 12, 64, **occupancy(IDLE))


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


@pytest.mark.slow
def test_a_busy_block_engine_sends_verified_work_to_an_idle_ar_engine(router):
    d = router().decide(req(ESSAY), view={"block": BUSY, "ar": IDLE})
    assert (d.mode, d.rule, d.load_aware) == ("ar", "load", True)
    assert "ms in verified" in d.reason


def test_a_busy_ar_engine_sends_ar_work_to_verified(router, model):
    r = Router(model=model, store=policy(load_aware={"enabled": True}))  # write -> ar by default
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 6.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9)
    d = r.decide(req(ESSAY), view={"block": IDLE, "ar": BUSY})
    assert (d.mode, d.rule) == ("verified", "load")


def test_under_load_a_mode_is_a_way_out_only_once_its_engine_has_answered_it_there(model):
    # The profile prices an idle engine; a busy one only roughly. The first burst at concurrency 8
    # moved reasoning to block on estimates 2x too kind (4 s each, AR ~2 s): under load a move to a
    # mode waits until that engine has answered requests of it in its present load.
    r = Router(model=model, store=policy(load_aware={"enabled": True}))  # write -> ar by default
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 6.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9)
    busy_block = replace(IDLE, running=2, idle=False)
    assert r.decide(req(ESSAY), view={"block": busy_block, "ar": BUSY}).mode == "ar"  # verified unknown there: stays
    assert r.decide(req(ESSAY), view={"block": replace(busy_block, seen=frozenset({"block"})), "ar": BUSY}).mode == "ar"
    moved = r.decide(req(ESSAY), view={"block": replace(busy_block, seen=frozenset({"verified"})), "ar": BUSY})
    assert (moved.mode, moved.rule) == ("verified", "load")


def test_the_view_says_which_modes_an_engine_has_answered_in_its_present_load():
    rv = RoutingView({"block": None, "ar": None})
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    assert rv.view()["block"].idle and rv.view()["block"].seen == frozenset()
    ar_busy = rv.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=100.0, service_ms=None)
    sent = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=100.0, service_ms=None)
    rv.returned(sent, ok=True)  # answered while the AR engine was busy
    view = rv.view()["block"]
    assert not view.idle and view.seen == frozenset({"verified"})
    assert rv.snapshot()["answered_by_load"] == {"verified (others busy)": 1}  # what operators see
    rv.returned(ar_busy, ok=True)
    assert rv.view()["block"].idle and rv.view()["block"].seen == frozenset()  # nothing answered while idle


def test_stays_put_without_enough_gain_or_when_switched_off(router):
    assert router(min_gain=100.0).decide(req(ESSAY), view={"block": BUSY, "ar": IDLE}).mode == "verified"
    assert router(cost_aware=False).decide(req(ESSAY), view={"block": BUSY, "ar": IDLE}).mode == "verified"
    assert router().decide(req(ESSAY)).mode == "verified"  # no queue view: nothing to weigh


def test_forced_modes_and_block_never_move(router):
    assert router().decide(req(ESSAY, model="tandem-verified"), view={"block": BUSY, "ar": IDLE}).mode == "verified"
    block_task = router().decide(req(EXTRACT), view={"block": BUSY, "ar": IDLE})
    assert (block_task.mode, block_task.rule) == ("block", "task_default")  # block differs from AR: no lossless swap


def test_block_and_ar_trade_places_only_for_tasks_of_equal_quality(model):
    def make(equal: list[str], **changes) -> Router:
        r = Router(model=model, store=policy(load_aware={"enabled": True, "equal_quality_tasks": equal}, **changes))
        r.cost = BY_CANVAS
        return r

    # extract defaults to block; with a busy block engine and extract listed, AR finishes it sooner
    moved = make(["extract"]).decide(req(EXTRACT), view={"block": BUSY, "ar": IDLE})
    assert (moved.mode, moved.rule, moved.load_aware, moved.canvas) == ("ar", "load", True, None)
    assert "ms in block" in moved.reason
    # not listed: block's answers differ from AR's in quality, so it stays
    assert make([]).decide(req(EXTRACT), view={"block": BUSY, "ar": IDLE}).mode == "block"
    # idle engines: a 64-token canvas beats ~40 AR steps on this profile, so block keeps it
    assert make(["extract"]).decide(req(EXTRACT), view={"block": IDLE, "ar": IDLE}).mode == "block"
    # write defaults to AR; listed and with a busy AR engine it moves to block (the fastest equal mode)
    # when the policy lets block write that long, never past the block limit
    essay = make(["write"], block_max_canvases=8).decide(req(ESSAY), view={"block": IDLE, "ar": BUSY})
    assert essay.mode == "block" and essay.canvas is not None and essay.predicted_tokens > 256
    assert make(["write"]).decide(req(ESSAY), view={"block": IDLE, "ar": BUSY}).mode != "block"


def test_block_cost_counts_the_steps_a_canvas_of_the_task_really_takes():
    """The model stops denoising once a canvas is stable and confident: a one-word label takes ~2
    steps, long free text all 12. Pricing every canvas at its full budget overstated short work 4x."""
    measured = CostProfile(ms_per_forward=CPU.ms_per_forward, canvas=256, block_steps_by_task={"classify": 2.0, "write": 12.0}, steps=12)
    assert measured.forwards("block", 2, 12, 64, "classify") == 3.0  # 2 steps + the commit
    assert measured.forwards("block", 2, 12, 64, "code") == 13  # unmeasured task: the whole budget
    assert measured.forwards("block", 2, 4, 64, "write") == 5  # never past the policy's budget
    assert measured.canvas_steps(24, "classify") == 4.0  # a larger budget than measured at: scaled
    assert measured.forwards("verified", 2, 12, 64, "classify") == 4.0  # the draft's steps + commit + verify


def test_verified_cost_counts_the_rounds_a_task_really_needs():
    """A 77% acceptance rate does not mean a 25-token answer comes from one 64-token draft: each
    wrong token costs another round. Measured rounds per canvas say how many it takes."""
    by_acceptance = CostProfile(ms_per_forward=CPU.ms_per_forward, canvas=256, acceptance_by_task={"extract": 0.77},
                                block_steps_by_task={"extract": 4.0})
    measured = CostProfile(ms_per_forward=CPU.ms_per_forward, canvas=256, acceptance_by_task={"extract": 0.77},
                           block_steps_by_task={"extract": 4.0}, verified_rounds_per_canvas={"extract": 3.0})
    assert by_acceptance.forwards("verified", 40, 12, 64, "extract") == 6.0  # one round: 0.77 x 64 + 1 >= 40
    assert measured.forwards("verified", 40, 12, 64, "extract") == 18.0  # three rounds on its one canvas
    assert measured.forwards("verified", 100, 12, 64, "extract") == 36.0  # two canvases' worth


def test_a_one_word_label_goes_to_ar_when_block_matches_its_quality(model):
    """At idle a short label costs ~2 AR steps but a whole canvas's denoising in block mode; for a task
    where block's answers are as good as AR's, the router takes the faster one."""

    r = Router(model=model, store=policy(load_aware={"enabled": True, "equal_quality_tasks": ["classify"]}))
    measured = {"block": {1: 33.0, 8: 283.0}, "ar": {1: 2.9, 8: 5.2}}  # the shipped checkpoint on the 2-core CPU
    r.cost = CostProfile(ms_per_forward=measured, canvas=256, block_ms_by_canvas={64: {1: 12.8, 8: 52.0}, 256: {1: 33.0, 8: 283.0}},
                         block_steps_by_task={"classify": 2.0}, steps=12)
    d = r.decide(req(LABEL), view={"block": IDLE, "ar": IDLE})
    assert (d.task, d.mode, d.rule) == ("classify", "ar", "load") and d.predicted_tokens <= 8


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
    assert make(acceptance=0.01).decide(req(ESSAY), view={"block": IDLE, "ar": IDLE}).mode == "ar"
    assert make(acceptance=0.01, acceptance_by_task={"write": 0.9}).decide(req(ESSAY), view={"block": IDLE, "ar": IDLE}).mode == "verified"


def test_the_routing_view_counts_the_gateways_own_requests_in_flight():
    """The engines' load is polled every 0.5 s; requests the gateway dispatched since count at once,
    so a burst does not all land on the engine that looked idle at the last poll, and requests that
    finished since do not keep an engine looking busy."""
    from engines.types import EngineLoad, GenerationRequest
    from router.decision.routing_view import RoutingView

    rv = RoutingView({"block": None, "ar": None})
    rv._polled = {"ar": EngineLoad(queued=0, running=0, capacity=8, max_queue=64), "block": EngineLoad(queued=1, running=8, capacity=8, max_queue=64)}
    tickets = [rv.dispatched(GenerationRequest(prompt="x", mode="ar"), None, None) for _ in range(11)]
    tickets += [rv.dispatched(GenerationRequest(prompt="x", mode="verified"), None, None) for _ in range(2)]
    occupancy = lambda v: (v.queued, v.running, v.capacity)  # noqa: E731
    view = rv.view()
    assert occupancy(view["ar"]) == (3, 8, 8)  # 11 dispatched: 8 running, 3 waiting
    assert occupancy(view["block"]) == (1, 8, 8)  # the poll saw more than we sent
    for t in tickets[:6]:
        rv.returned(t, ok=True)  # six AR requests finished after the poll
    assert occupancy(rv.view()["ar"]) == (0, 5, 8)
    assert view["block"].backlog_ms == 0.0 and view["ar"].calibration == 1.0 and view["ar"].backlog_ms is None
    rv._polled["block"] = None  # did not answer its poll
    assert rv.view()["block"] == EngineView(queue_ratio=1.0, reachable=False)


def test_calibration_scales_an_engines_estimates_toward_what_it_observes(model):
    from router.decision.live_costs import Calibration

    c = Calibration(alpha=0.5)
    assert c.factor == 1.0  # nothing observed yet: the profile as measured
    for _ in range(20):
        c.observe(observed_ms=300.0, estimated_ms=100.0)
    assert c.factor == pytest.approx(3.0, rel=1e-3)
    c.observe(observed_ms=1e6, estimated_ms=100.0)
    assert c.factor == 4.0  # clamped: one stalled request does not poison the estimates
    weighted = Calibration(alpha=0.5)
    for _ in range(20):
        weighted.observe(observed_ms=15.0, estimated_ms=5.0)  # a tiny request: mostly call overhead
        weighted.observe(observed_ms=550.0, estimated_ms=500.0)  # a long one, close to its estimate
    assert weighted.factor < 1.2  # long requests weigh by their length
    # an AR engine observed at 3x its profile loses a long answer to an idle block engine
    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"write": "ar"}, block_max_canvases=8,
                                         load_aware={"enabled": True, "equal_quality_tasks": ["write"], "min_gain": 1.5}))
    r.cost = BY_CANVAS
    busy_ar = EngineView(queued=0, running=4, capacity=8)
    assert r.decide(req(ESSAY), view={"block": replace(IDLE, backlog_ms=10000.0), "ar": busy_ar}).mode == "ar"
    slow_ar = replace(busy_ar, calibration=3.0)
    assert r.decide(req(ESSAY), view={"block": replace(IDLE, backlog_ms=10000.0), "ar": slow_ar}).mode == "block"


def test_verified_is_priced_by_what_its_requests_of_a_task_took(model):
    """The profile prices verified from the suite's acceptance; requests of a task whose drafts miss
    take far longer than that. Once a few of them have (per mode and task, decaying old evidence),
    the router prices verified for that task by what they took, and stops moving work to it,
    while other tasks keep the engine's own calibration."""
    from engines.types import GenerationRequest
    from router.decision.live_costs import IDLE as NO_LOAD
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {"ar": None, "block": None}
    for i in range(TASK_EVIDENCE + 2):
        ticket = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=50.0, service_ms=None, task="summarize")
        clock.advance(1.0)  # took 1 s against an estimate of 50 ms
        rv.returned(ticket, ok=True)
        if i == TASK_EVIDENCE - 2:
            assert rv.by_task[("verified", "summarize", NO_LOAD)].count < TASK_EVIDENCE
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    view = rv.view()
    assert view["block"].factor("verified", "summarize") == pytest.approx(20.0)  # what they took over what was estimated
    assert view["block"].factor("verified", "plan") == view["block"].calibration  # no evidence: the engine's own
    assert "verified/summarize" in rv.snapshot()["calibration_by_task"]
    # a router that moves summaries from AR to an idle verified engine (estimated ~10x sooner) stops doing so
    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"summarize": "ar"},
                                         load_aware={"enabled": True, "min_gain": 1.2}))
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 20.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9,
                         acceptance_by_task={"summarize": 0.98}, block_steps_by_task={"summarize": 2})
    summary = req("Summarize in one sentence: the meeting moved to Tuesday because the room was booked.", max_tokens=200)
    assert r.predict(summary).task == "summarize"
    fresh = {"block": IDLE, "ar": IDLE}
    assert r.decide(summary, view=fresh).mode == "verified"
    seen = {"block": replace(IDLE, by_task={("verified", "summarize"): view["block"].factor("verified", "summarize")}), "ar": IDLE}
    assert r.decide(summary, view=seen).mode == "ar"


def test_verified_is_priced_by_the_share_of_its_tokens_drafts_wrote_lately(model):
    """The profile prices verified by the task suite's acceptance. The routing view counts the share
    of each task's verified tokens that drafts really wrote (engines report accepted draft tokens);
    once a task has evidence, its verified estimate prices the rest as AR steps, so a task whose
    drafts stopped paying (AR unsure of its tokens, drafts rejected) costs about AR's time and no
    longer wins the cost-aware step, while a task whose drafts are accepted keeps it."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    profile = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 20.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9,
                          acceptance_by_task={"summarize": 0.98}, block_steps_by_task={"summarize": 2})
    assert profile.decode_ms("verified", 100, 12, 256, "summarize", 1, draft_share=0.0) == pytest.approx(100 * 6.0)
    full = profile.decode_ms("verified", 100, 12, 256, "summarize", 1)
    assert profile.decode_ms("verified", 100, 12, 256, "summarize", 1, draft_share=1.0) == pytest.approx(full) and full < 100 * 6.0 / 5
    assert profile.decode_ms("ar", 100, 12, 256, "summarize", 1, draft_share=0.0) == 100 * 6.0  # only verified reads it

    rv = RoutingView({"block": None, "ar": None})
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    for _ in range(TASK_EVIDENCE + 2):
        ticket = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=None, service_ms=None, task="summarize")
        rv.returned(ticket, ok=True, stats=DecodeStats(output_tokens=90, accepted=9, ar_tokens=81))
        ar = rv.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=None, service_ms=None, task="plan")
        rv.returned(ar, ok=True, stats=DecodeStats(output_tokens=50))  # AR requests draft nothing: not counted
    view = rv.view()
    assert view["block"].draft_share == {DraftKey("summarize"): pytest.approx(0.1)} and view["ar"].draft_share == {}
    assert rv.snapshot()["draft_share_by_task"] == {"summarize": 0.1}

    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"summarize": "ar"},
                                         load_aware={"enabled": True, "min_gain": 1.2}))
    r.cost = profile
    summary = req("Summarize in one sentence: the meeting moved to Tuesday because the room was booked.", max_tokens=200)
    assert r.decide(summary, view={"block": IDLE, "ar": IDLE}).mode == "verified"  # the suite's acceptance: ~5x sooner
    assert r.decide(summary, view={"block": replace(IDLE, draft_share={DraftKey("summarize"): 0.1}), "ar": IDLE}).mode == "ar"
    assert r.decide(summary, view={"block": replace(IDLE, draft_share={DraftKey("summarize"): 0.95}), "ar": IDLE}).mode == "verified"


def test_calibration_compares_what_a_request_took_with_its_estimate_for_what_it_really_wrote():
    """The router prices a request by its predicted (p90) length and the drafts' expected share;
    calibrating the engine against that estimate would read a shorter answer as a fast engine, and
    drafts that missed as a slow one (both priced apart). The view redoes the estimate for the
    tokens written and the share of them drafts wrote, and calibrates the engine against that. A
    task's own factor compares with the estimate `decide` priced: its lengths are mispredicted
    the same way each time, and that factor is what makes its estimates in two modes comparable."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.live_costs import IDLE as NO_LOAD
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    seen = []
    for _ in range(TASK_EVIDENCE + 2):
        # predicted 256 tokens at 2 ms (512 ms); it wrote 50, in 110 ms: the engine is 1.1x its profile, not 0.2x
        ticket = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=512.0, service_ms=None, task="write",
                               reestimate=lambda written, share: seen.append((written, share)) or (written or 256) * 2.0 * (1 - share / 2))
        clock.advance(0.110)
        rv.returned(ticket, ok=True, stats=DecodeStats(output_tokens=50, accepted=0, ar_tokens=50))
    assert seen[-2:] == [(50, 0.0), (None, 0.0)]  # the engine's at the length written, the task's at the predicted one
    assert rv.view()["block"].calibration == pytest.approx(1.1)
    assert rv.view()["block"].factor("verified", "write") == pytest.approx(110 / 512)
    plain = RoutingView({"block": None, "ar": None}, clock=clock)  # without a re-estimate: against the dispatch-time one
    ticket = plain.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=512.0, service_ms=None)
    clock.advance(0.110)
    plain.returned(ticket, ok=True, stats=DecodeStats(output_tokens=50))
    assert plain.calibration[("ar", NO_LOAD)].factor == pytest.approx(0.5)  # 110 / 512, at the clamp


def test_a_task_whose_length_is_overpredicted_is_priced_by_what_its_requests_took(model):
    """A label's predicted (p90) length is 4 tokens and it writes 1: AR's cost follows the length,
    block's the canvas, so the profile at the p90 prices AR's labels ~3x too slow against block's.
    A (mode, task)'s factor compares what its requests took with what `decide` priced, so two
    modes' estimates for the task meet what each really takes, and a label measured faster in AR
    stays there (an earlier factor against the re-estimate moved labels to block, 1.3x estimated
    sooner, 1.6x measured slower)."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"classify": "ar"},
                                         load_aware={"enabled": True, "min_gain": 1.25, "equal_quality_tasks": ["classify"]}))
    r.cost = CostProfile(ms_per_forward={"block": {1: 10.0, 8: 40.0}, "ar": {1: 2.5, 8: 3.5}}, canvas=64,
                         block_steps_by_task={"classify": 2}, prefill_ms_per_token={"block": 0.03, "ar": 0.03})
    label = req("Label the sentiment of this review as positive, negative or neutral: the battery died in two days.", max_tokens=16)
    d = r.decide(label)
    assert d.task == "classify" and d.predicted_tokens > 1
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    for _ in range(TASK_EVIDENCE):
        for mode, took_ms in (("ar", 0.020), ("block", 0.032)):  # measured: AR 20 ms, block 32 ms for a 1-token label
            view = rv.view()
            estimate = r.finish_estimate(mode, d.predicted_tokens, 12, 64, "classify", view)
            t = rv.dispatched(GenerationRequest(prompt="x", mode=mode), estimate, None, task="classify",
                              reestimate=lambda written, share, m=mode, v=view: r.finish_estimate(m, written or d.predicted_tokens, 12, 64,
                                                                                                  "classify", v))
            clock.advance(took_ms)
            rv.returned(t, ok=True, stats=DecodeStats(output_tokens=1, latency_s=took_ms))
    view = rv.view()
    ar_ms = view["ar"].priced("ar", "classify", r.finish_estimate("ar", d.predicted_tokens, 12, 64, "classify", view))
    block_ms = view["block"].priced("block", "classify", r.finish_estimate("block", d.predicted_tokens, 12, 64, "classify", view))
    assert ar_ms == pytest.approx(20.0) and block_ms == pytest.approx(32.0)
    assert r.decide(label, view=view).mode == "ar"


def test_verified_is_no_way_out_where_its_drafts_write_too_little_to_be_min_gain_sooner(model):
    """Verified at a live draft share s still writes 1 - s of its tokens by AR steps, so it cannot
    finish more than 1 / (1 - s) times sooner than AR: under s = 1 - 1/min_gain an estimate that
    says it can is calibration noise. On hand-written prompts (share 0) such estimates moved
    requests to verified 1.3-2.3x "sooner"; they took a median 1.1x AR's time."""
    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"summarize": "ar"},
                                         load_aware={"enabled": True, "min_gain": 1.25}))
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 20.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9,
                         acceptance_by_task={"summarize": 0.98}, block_steps_by_task={"summarize": 2})
    summary = req("Summarize in one sentence: the meeting moved to Tuesday because the room was booked.", max_tokens=200)
    fast = {("verified", "summarize"): 0.2}  # verified's requests of the task took a fifth of their estimate
    for share, mode in ((0.1, "ar"), (0.19, "ar"), (0.5, "verified")):
        view = {"block": replace(IDLE, by_task=fast, draft_share={DraftKey("summarize"): share}), "ar": IDLE}
        assert r.decide(summary, view=view).mode == mode, share
    lax = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"summarize": "ar"},
                                           load_aware={"enabled": True, "min_gain": 1.0}))
    lax.cost = r.cost
    view = {"block": replace(IDLE, by_task=fast, draft_share={DraftKey("summarize"): 0.1}), "ar": IDLE}
    assert lax.decide(summary, view=view).mode == "verified"  # min_gain 1: any share may do


def test_a_tasks_factor_is_not_skewed_by_estimates_made_before_its_draft_share_was_known():
    """Verified's first requests of a task are priced by the suite's acceptance (for reasoning, 0.005:
    ~20 s for 256 tokens); once the task's draft share is known they are priced by it (~0.6 s at a
    share of 0). A task factor learned against the first estimates (0.1x) and applied to the second
    priced reasoning in verified at 72 ms, and the router sent it there (2-2.7 s measured, block
    0.6 s). The task's factor compares with its estimate redone at the drafts' real share."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    by_share = lambda tokens, share: (tokens or 256) * 2.4 * (1 - share) + 60.0 * share  # noqa: E731  AR steps for what drafts did not write
    for _ in range(TASK_EVIDENCE + 2):
        t = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=20000.0, service_ms=None, task="reason",
                          reestimate=by_share)
        clock.advance(256 * 2.4 / 1000 * 1.2)  # 20% over its share-priced estimate
        rv.returned(t, ok=True, stats=DecodeStats(output_tokens=256, accepted=0, ar_tokens=256))
    assert rv.view()["block"].factor("verified", "reason") == pytest.approx(1.2)


def test_a_requests_fixed_overhead_is_added_not_scaled():
    """A one-word label decodes in ~10 ms and answers in ~30: the rest is the handle's hop, the chat
    template and the tokenizer, the same in every mode. Calibrating end-to-end time against the
    decode estimate would triple every estimate of that mode; the view calibrates the engine's own
    time (its queue and decode, reported with the result) and adds the overhead apart."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    for _ in range(TASK_EVIDENCE + 2):
        t = rv.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=10.0, service_ms=None, task="classify")
        clock.advance(0.030)
        rv.returned(t, ok=True, stats=DecodeStats(output_tokens=2, latency_s=0.010))
    ar = rv.view()["ar"]
    assert ar.factor("ar", "classify") == pytest.approx(1.0) and ar.overhead_ms == pytest.approx(20.0)
    assert ar.priced("ar", "classify", 10.0) == pytest.approx(30.0) and ar.priced("ar", "classify", 100.0) == pytest.approx(120.0)
    assert rv.snapshot()["overhead_ms"] == {"ar (idle)": 20.0}


def test_an_idle_engine_and_a_busy_one_are_calibrated_apart():
    """The profile prices a lone request on an idle machine well, and a batch, a queue or two engines
    sharing the cores only roughly: a busy spell's error must not reprice the next lone request
    (and back). Each load state (this engine busy or not, the other engine busy or not) keeps its own."""
    from engines.types import GenerationRequest
    from router.decision.live_costs import IDLE as NO_LOAD, LoadState
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    clock = ManualClock()
    rv = RoutingView({"block": None, "ar": None}, clock=clock)
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    gen = GenerationRequest(prompt="x", mode="block")
    for _ in range(TASK_EVIDENCE + 2):  # alone: as estimated
        t = rv.dispatched(gen, estimate_ms=100.0, service_ms=None, task="write")
        clock.advance(0.1)
        rv.returned(t, ok=True)
    for _ in range(TASK_EVIDENCE + 2):  # one behind another: the second takes 3x its estimate
        first = rv.dispatched(gen, estimate_ms=100.0, service_ms=None, task="write")
        second = rv.dispatched(gen, estimate_ms=100.0, service_ms=None, task="write")
        assert (first.load, second.load) == (NO_LOAD, LoadState(busy=True, others_busy=False))
        clock.advance(0.1)
        rv.returned(first, ok=True)
        clock.advance(0.2)
        rv.returned(second, ok=True)
    idle = rv.view()["block"]
    assert idle.factor("block", "write") == pytest.approx(1.0, rel=0.05) and idle.calibration < 1.5
    rv._in_flight["block"] += 1  # a request of another gateway's at the engine: the busy figures apply
    busy = rv.view()["block"]
    assert busy.factor("block", "write") == pytest.approx(3.0) and busy.calibration == pytest.approx(3.0)
    rv._in_flight["ar"] += 1  # and the AR engine busy too: a state with no evidence yet, priced as profiled
    assert rv.view()["block"].factor("block", "write") == 1.0 and rv.view()["ar"].calibration == 1.0
    snap = rv.snapshot()
    assert snap["calibration_by_task"]["block/write (busy)"] == pytest.approx(3.0)
    assert snap["calibration_by_load"]["block (busy)"] == pytest.approx(3.0) and snap["calibration"] == {"block": pytest.approx(1.0), "ar": 1.0}


def test_verified_is_not_chosen_where_its_drafts_are_expected_to_miss(model):
    """Verified's drafts are block's denoiser. Where the agreement head expects block to write
    something else than AR (prompts unlike the checkpoint's suite), the drafts are rejected and
    verified writes AR's answer by AR steps: its task default goes to AR, and cost-aware routing
    never moves such a request to verified, however much sooner the suite-based profile prices it.
    Requests the head expects block to answer as AR does keep both."""
    modes = dict(DEFAULT_TASK_MODES) | {"summarize": "verified"}
    make = lambda floor: Router(model=model, store=policy(task_modes=modes, agreement_floor=floor,  # noqa: E731
                                                          load_aware={"enabled": True, "min_gain": 1.2}))
    unfamiliar = req("Sum up this thread in two sentences for the on-call channel: the deploy failed twice because the "
                     "migration timed out; Dana rolled back and we will retry after the index rebuild tonight.", max_tokens=200)
    strict = make(0.3)
    pred = strict.predict(unfamiliar)
    assert pred.task == "summarize" and pred.agreement < 0.3, pred
    d = strict.decide(unfamiliar)
    assert (d.mode, d.rule) == ("ar", "disagreement") and "drafts expected to miss" in d.reason
    # a busy AR engine and a profile that prices verified drafts as nearly free: still AR
    strict.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 20.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.95)
    assert strict.decide(unfamiliar, view={"block": IDLE, "ar": BUSY}).mode == "ar"
    # with the agreement rule off (floor 0) the same request is verified, and the cost model may move it
    lax = make(0.0)
    lax.cost = strict.cost
    assert lax.decide(unfamiliar).mode == "verified"
    ar_default = Router(model=model, store=policy(task_modes=modes | {"summarize": "ar"}, agreement_floor=0.0,
                                                  load_aware={"enabled": True, "min_gain": 1.2}))
    ar_default.cost = strict.cost
    assert ar_default.decide(unfamiliar, view={"block": IDLE, "ar": BUSY}).mode == "verified"


def test_verified_earns_back_requests_block_is_expected_to_differ_on_where_their_drafts_pay(model):
    """The agreement head speaks of block's whole answer; verified keeps every draft token AR agrees
    with, so a task can be drafted well where block's answers differ (the suite's extractions:
    agreement ~0.2, drafts still write most tokens). The engines count the draft share apart for
    requests the head expected to differ (`DraftKey(task, agrees=False)`); once a task has that
    evidence, cost-aware routing prices verified by it and moves such requests off AR when
    verified is min_gain faster, and leaves them on AR when their drafts miss."""
    from engines.types import DecodeStats, GenerationRequest
    from router.decision.routing_view import TASK_EVIDENCE, RoutingView

    rv = RoutingView({"block": None, "ar": None})
    rv._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in ("block", "ar")}
    for _ in range(TASK_EVIDENCE):
        for agrees, accepted in ((True, 90), (False, 20)):
            ticket = rv.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=None, service_ms=None,
                                   task="summarize", agrees=agrees)
            rv.returned(ticket, ok=True, stats=DecodeStats(output_tokens=100, accepted=accepted, ar_tokens=100 - accepted))
    assert rv.view()["block"].draft_share == {DraftKey("summarize"): pytest.approx(0.9), DraftKey("summarize", False): pytest.approx(0.2)}
    assert rv.snapshot()["draft_share_by_task"] == {"summarize": 0.9, "summarize (block expected to differ)": 0.2}

    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"summarize": "verified"}, agreement_floor=0.3,
                                         load_aware={"enabled": True, "min_gain": 1.2}))
    r.cost = CostProfile(ms_per_forward={"block": {1: 5.0, 8: 20.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.9,
                         acceptance_by_task={"summarize": 0.98}, block_steps_by_task={"summarize": 2})
    unfamiliar = req("Sum up this thread in two sentences for the on-call channel: the deploy failed twice because the "
                     "migration timed out; Dana rolled back and we will retry after the index rebuild tonight.", max_tokens=200)
    assert r.predict(unfamiliar).agreement < 0.3
    assert r.decide(unfamiliar, view={"block": IDLE, "ar": IDLE}).mode == "ar"  # no evidence for such requests
    # evidence for requests block agrees on says nothing of this one
    assert r.decide(unfamiliar, view={"block": replace(IDLE, draft_share={DraftKey("summarize"): 1.0}), "ar": IDLE}).mode == "ar"
    drafted = r.decide(unfamiliar, view={"block": replace(IDLE, draft_share={DraftKey("summarize", False): 0.95}), "ar": IDLE})
    assert (drafted.mode, drafted.rule) == ("verified", "load") and "moved to verified" in drafted.reason
    missed = r.decide(unfamiliar, view={"block": replace(IDLE, draft_share={DraftKey("summarize", False): 0.1}), "ar": IDLE})
    assert (missed.mode, missed.rule) == ("ar", "disagreement")
    # a draft share a request of the other kind would be priced by is not this one's
    assert r.draft_key(drafted) == DraftKey("summarize", False)


def test_the_view_hands_the_engines_cost_profile_to_the_router(model):
    """Cost-aware routing needs the profile the block engine ships: the view fetches it on its first
    poll and the router built on it (`Router(costs=view)`) prices by it (a refactor once dropped that
    hand-over, and cost-aware routing went silently off)."""
    import asyncio

    from router.decision.routing_view import RoutingView

    class Engine:  # the EngineClient calls the view makes (router.decision.engine_client)
        def __init__(self, profile):
            self.profile = profile

        async def cost_profile(self):
            return self.profile

        async def info(self):
            return None

        async def load(self):
            return EngineLoad(queued=0, running=0, capacity=8, max_queue=64)

    rv = RoutingView({"block": Engine(BY_CANVAS), "ar": Engine(None)})
    r = Router(model=model, store=policy(load_aware={"enabled": True}), costs=rv)
    assert r.cost is None and r.decide(req(ESSAY)).prices.cost is None  # no poll yet: nothing to price by

    async def run():
        await rv.ready()
        rv._poller.cancel()

    asyncio.run(run())
    assert rv.cost is BY_CANVAS and r.cost is BY_CANVAS
    assert r.decide(req(ESSAY)).prices.cost is BY_CANVAS, "the router prices by the profile its view fetched"


# Prefill priced per prompt token (tandem bench prefix --write-profile): 0.05 ms a token, both engines.
PREFILL = replace(CPU, prefill_ms_per_token={"block": 0.05, "ar": 0.05})


def test_a_prompts_prefill_is_priced_less_what_the_prefix_cache_holds():
    bare = PREFILL.finish_ms("ar", 10, 12, 256, **occupancy(IDLE))
    assert PREFILL.finish_ms("ar", 10, 12, 256, **occupancy(IDLE), prompt_tokens=4000) == pytest.approx(bare + 200.0)
    assert PREFILL.finish_ms("ar", 10, 12, 256, **occupancy(IDLE), prompt_tokens=4000, cached_tokens=3000) == pytest.approx(bare + 50.0)
    assert PREFILL.service_ms("verified", 10, 12, 64, prompt_tokens=4000) == pytest.approx(PREFILL.service_ms("verified", 10, 12, 64) + 200.0)
    assert CPU.finish_ms("ar", 10, 12, 256, **occupancy(IDLE), prompt_tokens=4000) == bare  # not measured: not priced
    where = Path(tempfile.mkdtemp())
    PREFILL.save(where)
    assert CostProfile.load(where) == PREFILL


def test_the_router_expects_an_engine_to_reuse_a_long_conversations_head_as_it_has_so_far(model):
    """An agent's turn: a 2,000-token system prompt, then the new message. The engine whose prefix
    cache has served 90% of the prefix tokens it was asked for is expected to skip 90% of the head."""
    from router.decision.features import prompt_size

    r = Router(model=model, store=policy())
    r.cost = PREFILL
    messages = [{"role": "system", "content": "Follow the rules. " * 450}, {"role": "user", "content": "Extract the city: Ann lives in Oslo."}]
    prompt = prompt_size(messages)
    assert prompt.head_tokens >= 2000 and prompt.tokens > prompt.head_tokens
    cold = r.finish_estimate("ar", 10, 12, None, "extract", {"ar": IDLE}, prompt)
    warm = r.finish_estimate("ar", 10, 12, None, "extract", {"ar": replace(IDLE, prefix_reuse=0.9)}, prompt)
    assert cold - warm == pytest.approx(0.9 * prompt.head_tokens * 0.05)
    decision = r.decide({"messages": messages})
    assert (decision.prompt_tokens, decision.prefix_tokens) == (prompt.tokens, prompt.head_tokens)


def test_the_view_reads_each_engines_prefix_reuse_from_its_load():
    from router.decision.routing_view import RoutingView

    rv = RoutingView({"block": None, "ar": None})
    stats = {"prefix_cache": {"reused_tokens": 3000, "looked_up_tokens": 4000}}
    rv._polled = {"ar": EngineLoad(queued=0, running=0, capacity=8, max_queue=64, stats=stats),
                  "block": EngineLoad(queued=0, running=0, capacity=8, max_queue=64)}
    view = rv.view()
    assert view["ar"].prefix_reuse == 0.75 and view["block"].prefix_reuse == 0.0
    assert rv.snapshot()["prefix_reuse"] == {"ar": 0.75, "block": 0.0}  # what /admin/stats shows under routing
