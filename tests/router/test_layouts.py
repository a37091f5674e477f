"""Layouts (router/decision/layouts.py): the engine of a mode comes from the app's layout, so the
routing view counts a shared replica's requests once, and the router never spills a request to
another mode of the same full replica (it would wait in the same queue)."""

from __future__ import annotations

from engines.types import GenerationRequest
from router.decision.layouts import SHARED, SPLIT, EngineViews, engine_of
from router.decision.engine_view import EngineView
from router.decision.routing_view import RoutingView
from tests.router.test_decide import req, route  # noqa: F401 - the fixture and its request factory


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
