"""Layouts (router/decision/layouts.py): the engine of a mode comes from the app's layout, so the
routing view counts a shared replica's requests once, and the router never spills a request to
another mode of the same full replica (it would wait in the same queue), and cost-aware routing
prices a mode on a shared replica with the turns the other modes' steps take there."""

from __future__ import annotations

import asyncio

import pytest

from engines.types import EngineLoad, GenerationRequest
from policies.schema import DEFAULT_TASK_MODES
from router import Router
from router.decision.features import PromptSize
from router.decision.layouts import SHARED, SPLIT, EngineViews, engine_of
from router.decision.pricing import PriceQuery, Pricing
from router.decision.engine_view import EngineView
from router.decision.routing_view import RoutingView
from tests.router.helpers import CPU, ESSAY, policy, req


def test_each_layout_names_the_engine_of_every_mode():
    assert [SPLIT.engine(m) for m in ("block", "verified", "ar")] == ["block", "block", "ar"]
    assert (SPLIT.modes("block"), SPLIT.modes("ar")) == (["block", "verified"], ["ar"])
    assert SHARED.modes("shared") == ["block", "verified", "ar"] and set(SHARED.deployments.values()) == {"SharedEngine"}
    assert engine_of({"block": None}, "verified") == "block", "a plain mapping is the split layout's"
    assert engine_of(EngineViews({}, SHARED), "ar") == "shared"


def test_the_routing_view_counts_every_mode_at_the_one_shared_engine():
    view = RoutingView({"shared": None}, layout=SHARED)
    tickets = [view.dispatched(GenerationRequest(prompt="hi", mode=m), estimate_ms=10.0, service_ms=10.0) for m in ("block", "verified", "ar")]
    assert {t.engine for t in tickets} == {"shared"} and view._in_flight == {"shared": 3}
    assert view.backlog.ahead_ms(tickets[0].started) > 0, "canvas work is priced in the shared engine's backlog"
    for t in tickets:
        view.returned(t, ok=False)
    assert view._in_flight == {"shared": 0}


def test_a_full_shared_replica_spills_nowhere(route):  # noqa: F811
    on = route(load_aware={"enabled": True, "max_queue_ratio": 0.8, "spill_order": ["verified", "ar"]})
    split_full = {"block": EngineView(queue_ratio=0.95), "ar": EngineView(queue_ratio=0.2)}
    assert on.decide(req(), split_full).mode == "ar", "split: AR's own engine takes the block engine's overflow"
    shared_full = EngineViews({"shared": EngineView(queue_ratio=0.95)}, SHARED)
    d = on.decide(req(), shared_full)
    assert (d.mode, d.load_aware) == ("block", False), "shared: every mode waits in the same queue"


# ---- prices on a shared replica ---------------------------------------------------------------------

def busy_with_canvases(layout, canvases: int) -> RoutingView:
    """A routing view of `layout` whose block engine has `canvases` block requests of one full canvas
    in flight from this gateway (priced into its backlog as dispatch prices them), and has answered
    an AR request while busy (so AR counts as a known way out under this load)."""
    view = RoutingView({e: None for e in layout.deployments}, layout=layout)
    view._polled = {e: EngineLoad(queued=0, running=0, capacity=8, max_queue=64) for e in layout.deployments}
    for _ in range(canvases):
        view.dispatched(GenerationRequest(prompt="x", mode="block"), estimate_ms=None, service_ms=CPU.service_ms("block", 200, 12, 256))
    answered = view.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=50.0, service_ms=50.0)
    answered.started -= 0.05  # it took as long as estimated: calibration stays at 1
    view.returned(answered, ok=True)
    return view


def cost_aware_router(model) -> Router:
    r = Router(model=model, store=policy(task_modes=dict(DEFAULT_TASK_MODES) | {"write": "verified"}, load_aware={"enabled": True}))
    r.cost = CPU
    return r


def test_on_a_shared_replica_ar_does_not_escape_the_canvases_it_takes_turns_with(model):
    # Six canvases ahead (~1.9 s): on the split layout AR has an engine of its own and the essay
    # (200 tokens, ~1.2 s of AR steps) moves there. On one shared replica the scheduler gives block's
    # batch equal turns with AR's, so AR's 1.2 s take ~2.4 s there: no faster than verified behind
    # the canvases, and it stays. (Priced as before, AR looked 1.6x faster on the shared replica too:
    # block's rows counted as AR batch-mates at AR's step price, the canvases' time not at all.)
    r, essay = cost_aware_router(model), req(ESSAY, max_tokens=200)
    split, shared = (busy_with_canvases(layout, canvases=6).view() for layout in (SPLIT, SHARED))
    moved = r.decide(essay, split)
    assert (moved.mode, moved.rule) == ("ar", "load"), moved.reason
    assert "ar" in shared["shared"].seen and shared["shared"].by_mode == {"block": 6}
    stayed = r.decide(essay, shared)
    assert (stayed.mode, stayed.rule) == ("verified", "task_default"), stayed.reason
    tokens, prompt = stayed.predicted_tokens, PromptSize(0, 0)
    alone = r.priced_ms("ar", tokens, r.policy, stayed.task, split, prompt)
    turns = min(shared["shared"].backlog_ms, alone)  # block takes as long as AR does, while it has work
    assert r.priced_ms("ar", tokens, r.policy, stayed.task, shared, prompt) == pytest.approx(alone + turns, rel=0.01)


def test_the_view_of_a_shared_replica_carries_each_modes_requests_step_time_and_tokens_work():
    """What pricing counts the turns by: each mode's requests there (the poll's, or this gateway's own
    when more), each mode's ms per step between two polls (the scheduler's steps and decode_s), and
    the tokens lane's work this gateway has there (its rows share steps: the longest one's end, not their sum)."""
    class Replica:  # the EngineClient call the poll makes (router.decision.engine_client)
        def __init__(self):
            self.loads = iter([
                EngineLoad(queued=0, running=2, capacity=8, max_queue=64, by_mode={"block": 2},
                           stats={"steps": {"block": 10}, "decode_s": {"block": 1.0}}),
                EngineLoad(queued=1, running=3, capacity=8, max_queue=64, by_mode={"block": 2, "ar": 2},
                           stats={"steps": {"block": 14, "ar": 40}, "decode_s": {"block": 1.6, "ar": 0.2}}),
            ])

        async def load(self):
            return next(self.loads)

    view, replica = RoutingView({"shared": None}, layout=SHARED), Replica()
    for _ in range(2):
        asyncio.run(view._probe("shared", replica))
    ar = [view.dispatched(GenerationRequest(prompt="x", mode="ar"), estimate_ms=None, service_ms=ms) for ms in (300.0, 800.0, 500.0)]
    seen = view.view()["shared"]
    assert seen.by_mode == {"block": 2, "ar": 3}, "AR: this gateway's three in flight outnumber the poll's two"
    assert seen.step_ms == pytest.approx({"block": 150.0, "ar": 5.0}), "block: 0.6 s over its last 4 steps; ar: since the start"
    assert 700.0 < seen.tokens_work_ms <= 800.0, "the longest AR request's end, not the three's sum"
    for ticket in ar:
        view.returned(ticket, ok=False)
    assert view.view()["shared"].by_mode == {"block": 2} and view.view()["shared"].tokens_work_ms == 0.0
    split = RoutingView({"block": None, "ar": None})
    split._polled = {e: EngineLoad(queued=0, running=1, capacity=8, max_queue=64, by_mode={"ar": 1}) for e in ("block", "ar")}
    assert split.view()["ar"].by_mode == {} and split.view()["ar"].tokens_work_ms is None, "the split layout is priced as before"


def test_a_canvas_on_a_shared_replica_waits_for_ar_turns_no_longer_than_ar_has_work():
    """Block's own work (its backlog and service) plus AR's turns: as long as block's own, while AR
    has that much work ahead; only AR's work ahead when it has less; nothing on a split engine."""
    own = CPU.finish_ms("block", 200, 12, 256, queued=0, running=0, capacity=8, backlog_ms=0.0)
    at = lambda **v: EngineViews({"shared": EngineView(capacity=8, backlog_ms=0.0, **v)}, SHARED)  # noqa: E731
    price = lambda v: Pricing(CPU).finish_estimate(PriceQuery("block", 200, 12, 256, "write"), v)  # noqa: E731
    assert price(at(by_mode={"block": 1})) == pytest.approx(own)
    assert price(at(by_mode={"ar": 4}, step_ms={"ar": 5.0}, tokens_work_ms=10_000.0)) == pytest.approx(2 * own + 5.0)
    assert price(at(by_mode={"ar": 4}, step_ms={"ar": 5.0}, tokens_work_ms=100.0)) == pytest.approx(own + 100.0)
    assert price({"block": EngineView(capacity=8, backlog_ms=0.0)}) == pytest.approx(own)


def test_a_shared_replicas_work_ahead_is_kept_by_lane():
    """Verified's rows share the tokens lane's steps with AR's on a shared replica: its work joins the
    tokens lane's, not the canvas backlog; on the split layout's block engine it joins the backlog."""
    shared, split = RoutingView({"shared": None}, layout=SHARED), RoutingView({"block": None, "ar": None})
    for view in (shared, split):
        view.dispatched(GenerationRequest(prompt="x", mode="verified"), estimate_ms=None, service_ms=500.0)
    ticket = split.dispatched(GenerationRequest(prompt="x", mode="block"), estimate_ms=None, service_ms=100.0)
    assert split.backlog.ahead_ms(ticket.started) > 500.0, "split: verified's and block's work, one serial server"
    ticket = shared.dispatched(GenerationRequest(prompt="x", mode="block"), estimate_ms=None, service_ms=100.0)
    assert shared.backlog.ahead_ms(ticket.started) == pytest.approx(100.0), "shared: the canvas backlog holds block's work only"
    assert 400.0 < shared.tokens_work["shared"].ahead_ms(ticket.started) <= 500.0, "shared: verified's work is the tokens lane's"


def shared_at(**view) -> EngineViews:
    return EngineViews({"shared": EngineView(capacity=8, **{"backlog_ms": 0.0} | view)}, SHARED)


def test_verified_and_ar_are_batch_mates_on_a_shared_replica_not_each_others_turns():
    """A tokens-lane request prices the other tokens mode's rows into its own batch (one step serves
    both), not as turns; only the canvases' turns are added, and they are shared by the lane's modes."""
    price = lambda mode, v: Pricing(CPU).finish_estimate(PriceQuery(mode, 100, 12, 256, "write"), v)  # noqa: E731
    ar_alone = CPU.finish_ms("ar", 100, 12, 256, queued=0, running=4, capacity=8)
    assert price("ar", shared_at(by_mode={"verified": 4})) == pytest.approx(ar_alone), "verified's rows: batch-mates, no turns"
    verified = CPU.finish_ms("verified", 100, 12, 256, queued=0, running=4, capacity=8)
    assert price("verified", shared_at(by_mode={"ar": 4}, backlog_ms=60_000.0)) == pytest.approx(verified), \
        "verified waits in the tokens lane, not behind the canvas backlog, when no canvas is there"
    # with canvases too: the tokens lane holds two of the three busy modes, so block takes half of its time
    turns = price("ar", shared_at(by_mode={"verified": 4, "block": 2}, step_ms={"block": 40.0}, backlog_ms=60_000.0)) - ar_alone
    assert turns == pytest.approx(ar_alone / 2 + 40.0)


def test_a_canvas_beside_both_tokens_modes_takes_two_of_three_shares_in_turns():
    own = CPU.finish_ms("block", 200, 12, 256, queued=0, running=0, capacity=8, backlog_ms=0.0)
    price = lambda v: Pricing(CPU).finish_estimate(PriceQuery("block", 200, 12, 256, "write"), v)  # noqa: E731
    both = shared_at(by_mode={"ar": 2, "verified": 2}, step_ms={"ar": 5.0, "verified": 9.0}, tokens_work_ms=100_000.0)
    assert price(both) == pytest.approx(3 * own + 14.0)
    assert price(shared_at(by_mode={"ar": 2, "verified": 2}, tokens_work_ms=300.0)) == pytest.approx(own + 300.0), \
        "no longer than the tokens lane has work"


def test_a_replica_whose_lanes_decode_on_threads_of_their_own_takes_no_turns():
    """lane_threads 2 (the poll's `EngineLoad.lane_threads`): a canvas beside both tokens modes, and an
    AR request beside canvases, are priced at their own lane's work alone."""
    own = CPU.finish_ms("block", 200, 12, 256, queued=0, running=0, capacity=8, backlog_ms=0.0)
    price = lambda mode, v: Pricing(CPU).finish_estimate(PriceQuery(mode, 200, 12, 256, "write"), v)  # noqa: E731
    busy = {"by_mode": {"ar": 2, "verified": 2, "block": 2}, "step_ms": {"ar": 5.0, "verified": 9.0, "block": 40.0},
            "tokens_work_ms": 100_000.0, "backlog_ms": 60_000.0}
    assert price("block", shared_at(**busy | {"backlog_ms": 0.0}, lanes_apart=True)) == pytest.approx(own)
    assert price("block", shared_at(**busy | {"backlog_ms": 0.0})) > 2 * own, "one thread: the tokens lane's turns"
    ar = price("ar", shared_at(**busy, lanes_apart=True))
    assert ar == pytest.approx(CPU.finish_ms("ar", 200, 12, 256, queued=0, running=4, capacity=8))
    view = RoutingView({"shared": None}, layout=SHARED)
    view._polled = {"shared": EngineLoad(queued=0, running=2, capacity=8, max_queue=64, by_mode={"ar": 2}, lane_threads=2)}
    assert view.view()["shared"].lanes_apart
    split = RoutingView({"block": None, "ar": None})
    split._polled = {e: EngineLoad(queued=0, running=1, capacity=8, max_queue=64, lane_threads=2) for e in ("block", "ar")}
    assert not split.view()["ar"].lanes_apart, "the split layout is priced as before"
