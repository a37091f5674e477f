"""The routing rules one by one (router.decision.rules): each rule moves the route where its policy
field says and leaves it alone otherwise, on a real Policy and a Prediction as the model gives
it; `apply` records every move in the trace. tests/router/test_decide.py covers them together
through Router.decide with the shipped model."""

from __future__ import annotations

import pytest

from engines.cost import CostProfile
from policies import Policy
from policies.schema import DEFAULT_TASK_MODES, KeyOverride
from policies.stores import default_policy
from router import RouteRequest, Router
from router.decision import rules
from router.decision.errors import BadRouteError, ModelNotFoundError, RouteForbiddenError
from router.decision.engine_view import EngineView
from router.decision.pricing import Pricing
from router.decision.rules import RULES, RouteContext, apply
from router.decision.types import Prediction

IDLE = EngineView(queued=0, running=0, capacity=8)
BUSY = EngineView(queued=40, running=8, capacity=8)  # a long queue to price, under the spilling ratio: only cost_aware moves it


def policy(**changes) -> Policy:
    return Policy.model_validate({**default_policy().content(), "task_modes": dict(DEFAULT_TASK_MODES), "block_max_canvases": 1,
                                  "agreement_floor": 0.5, "confidence_floor": 0.5, **changes})


def ctx(task="extract", confidence=0.9, agreement=None, tokens=40, p=None, route=None, **kw) -> RouteContext:
    """A context for `task` predicted at `confidence` (and agreement), with the route so far `route`
    ((mode, rule) as an earlier rule left it)."""
    req = RouteRequest.from_prompt("Extract the name as JSON: Alice Smith.", **kw.pop("req", {}))
    pred = Prediction(task=task, confidence=confidence, probabilities={task: confidence}, predicted_tokens=tokens, agreement=agreement)
    c = RouteContext(req, p or policy(), pred, tokens, **kw)
    if route is not None:
        c = RouteContext(**{**c.__dict__, "mode": route[0], "rule": route[1], "reason": "earlier"})
    return c


def test_forced_takes_the_forced_mode_and_says_by_what():
    move = rules.forced(ctx(forced="ar", forced_by="header"))
    assert (move.mode, move.rule) == ("ar", "forced_header") and "header x-tandem-mode forces ar" in move.reason
    assert rules.forced(ctx()) is None


def test_forcing_checks_the_request_against_the_policy():
    p = policy()
    req = lambda **kw: RouteRequest.from_prompt("hi", **kw)  # noqa: E731
    assert rules.forcing(req(model="tandem-ar"), p, None) == ("ar", "model")
    assert rules.forcing(req(headers={"X-Tandem-Mode": "Verified"}), p, None) == ("verified", "header")
    assert rules.forcing(req(), p, KeyOverride(force_mode="block")) == ("block", "api_key")
    assert rules.forcing(req(), p, None) == (None, None)
    with pytest.raises(ModelNotFoundError):
        rules.forcing(req(model="gpt-4"), p, None)
    with pytest.raises(BadRouteError):
        rules.forcing(req(model="tandem-ar", headers={"x-tandem-mode": "block"}), p, None)
    with pytest.raises(RouteForbiddenError):
        rules.forcing(req(headers={"x-tandem-mode": "ar"}), policy(forcing={**p.forcing.model_dump(), "allow_header": False}), None)


def test_task_default_follows_the_key_over_the_policy():
    move = rules.task_default(ctx("write"))
    assert (move.mode, move.rule, move.reason) == ("ar", "task_default", "task write -> ar (task_modes)")
    keyed = rules.task_default(ctx("write", override=KeyOverride(task_modes={"write": "verified"})))
    assert (keyed.mode, keyed.reason) == ("verified", "task write -> verified (key task_modes)")
    assert rules.task_default(ctx(forced="ar", forced_by="model")) is None


def test_long_output_sends_a_block_answer_past_the_limit_to_long_mode():
    limit = policy().block_limit_tokens
    move = rules.long_output(ctx(tokens=limit + 1, route=("block", "task_default")))
    assert (move.mode, move.rule) == (policy().long_mode, "long_output") and f"> block limit {limit}" in move.reason
    assert rules.long_output(ctx(tokens=limit, route=("block", "task_default"))) is None
    assert rules.long_output(ctx(tokens=limit + 1, route=("ar", "task_default"))) is None  # only block is length-limited


def test_low_confidence_plays_safe_under_the_floor():
    move = rules.low_confidence(ctx(confidence=0.3, route=("block", "task_default")))
    assert (move.mode, move.rule) == (policy().safe_mode, "low_confidence")
    assert rules.low_confidence(ctx(confidence=0.7, route=("block", "task_default"))) is None
    assert rules.low_confidence(ctx(confidence=0.3, route=("ar", "task_default"))) is None
    assert rules.low_confidence(ctx(confidence=0.7, route=("block", "task_default"), override=KeyOverride(confidence_floor=0.8))) is not None


def test_disagreement_moves_block_to_safe_mode_and_verified_to_ar():
    block = rules.disagreement(ctx(agreement=0.2, route=("block", "task_default")))
    assert (block.mode, block.rule) == (policy().safe_mode, "disagreement") and block.reason.startswith("earlier; block expected")
    verified = rules.disagreement(ctx(agreement=0.2, route=("verified", "long_output")))
    assert (verified.mode, verified.rule) == ("ar", "disagreement")
    assert rules.disagreement(ctx(agreement=0.9, route=("block", "task_default"))) is None
    assert rules.disagreement(ctx(agreement=None, route=("block", "task_default"))) is None  # no agreement head: block is trusted
    assert rules.disagreement(ctx(agreement=0.2, route=("verified", "low_confidence"))) is None  # the safe mode is not second-guessed


def test_load_spill_moves_off_a_full_queue_to_the_first_free_mode():
    full, free = EngineView(queue_ratio=0.95), EngineView(queue_ratio=0.2)
    p = policy(load_aware={"enabled": True, "max_queue_ratio": 0.8, "spill_order": ["verified", "ar"]})
    move = rules.load_spill(ctx(p=p, view={"block": full, "ar": free}, route=("block", "task_default")))
    # verified shares the block engine's queue: AR takes it
    assert (move.mode, move.rule, move.moved) == ("ar", "load", True) and "block queue at 0.95 > 0.80, spilled to ar" in move.reason
    assert rules.load_spill(ctx(p=p, view={"block": free, "ar": free}, route=("block", "task_default"))) is None
    assert rules.load_spill(ctx(p=p, view={"block": full, "ar": full}, route=("block", "task_default"))) is None  # nowhere to go
    off = policy(load_aware={"enabled": False})
    assert rules.load_spill(ctx(p=off, view={"block": full, "ar": free}, route=("block", "task_default"))) is None


def test_cost_aware_moves_to_a_mode_estimated_faster_at_equal_quality(model):
    p = policy(load_aware={"enabled": True})
    pricing = Pricing(CostProfile(ms_per_forward={"block": {1: 24.0, 8: 86.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.5))
    busy_block = {"block": BUSY, "ar": IDLE}
    move = rules.cost_aware(ctx("write", p=p, tokens=300, view=busy_block, prices=pricing, route=("verified", "task_default")))
    assert (move.mode, move.rule, move.moved) == ("ar", "load", True) and "ms in verified" in move.reason
    busy_ar = rules.cost_aware(ctx("write", p=p, tokens=300, view={"block": IDLE, "ar": BUSY}, prices=pricing, route=("ar", "task_default")))
    assert (busy_ar.mode, busy_ar.rule) == ("verified", "load")  # lossless both ways
    assert rules.cost_aware(ctx("write", p=p, tokens=300, view=busy_block, prices=pricing, route=("ar", "task_default"))) is None
    pricing = Pricing()  # no profile: nothing to price by
    assert rules.cost_aware(ctx("write", p=p, tokens=300, view=busy_block, prices=pricing, route=("verified", "task_default"))) is None


SCHEMA = {"structured": "json_schema", "skeleton": True}


def priced_router(model, p: Policy) -> Pricing:
    """Prices by the cost profile of the cost_aware test: a 100-token answer is ~310 ms in block
    and ~600 ms in AR on idle engines, and block's queue or backlog makes it seconds."""
    return Pricing(CostProfile(ms_per_forward={"block": {1: 24.0, 8: 86.0}, "ar": {1: 6.0, 8: 8.5}}, canvas=256, acceptance=0.5))


def skeleton_route(pricing, view, p, **kw):
    return rules.skeleton(ctx(req=SCHEMA, p=p, tokens=100, view=view, prices=pricing, route=("verified", "task_default"), **kw))


def test_skeleton_sends_a_seedable_answer_to_skeleton_mode_unless_forced():
    move = rules.skeleton(ctx(req=SCHEMA, route=("ar", "task_default")))
    assert (move.mode, move.rule) == (policy().skeleton_mode, "skeleton")
    assert rules.skeleton(ctx(req=SCHEMA, forced="ar", forced_by="model", route=("ar", "forced_model"))) is None
    assert rules.skeleton(ctx(req=SCHEMA | {"logprobs": True}, route=("ar", "task_default"))) is None  # logprobs: not seedable
    assert rules.skeleton(ctx(req={"structured": "json_object"}, route=("ar", "task_default"))) is None  # no skeleton: grammar's


def test_skeleton_goes_to_block_only_while_block_is_priced_sooner_at_the_current_load(model):
    p = policy(load_aware={"enabled": True}, constrained_mode="ar")
    pricing = priced_router(model, p)
    idle = skeleton_route(pricing, {"block": IDLE, "ar": IDLE}, p)
    assert (idle.mode, idle.rule, idle.moved) == ("block", "skeleton", False) and "ms in block vs" in idle.reason
    queued = skeleton_route(pricing, {"block": BUSY, "ar": IDLE}, p)
    assert (queued.mode, queued.rule, queued.moved) == ("ar", "skeleton", True)
    assert "at the current load: constrained_mode ar" in queued.reason
    behind = skeleton_route(pricing, {"block": EngineView(running=1, capacity=8, backlog_ms=1500.0), "ar": IDLE}, p)
    assert behind.mode == "ar"  # the block engine's backlog (the canvases this gateway sent ahead) prices it
    assert skeleton_route(pricing, {"block": IDLE, "ar": IDLE}, p).mode == "block"  # the load dropped: back to block
    assert skeleton_route(pricing, {"block": IDLE, "ar": BUSY}, p).mode == "block"  # AR's queue only makes block surer
    verified = policy(load_aware={"enabled": True}, constrained_mode="verified")
    assert skeleton_route(priced_router(model, verified), {"block": BUSY, "ar": IDLE}, verified).mode == "block"  # verified waits there too


def test_skeleton_keeps_off_block_where_block_is_expected_to_answer_worse(model):
    p = policy(load_aware={"enabled": True}, agreement_floor=0.5)
    pricing = priced_router(model, p)
    worse = skeleton_route(pricing, {"block": IDLE, "ar": IDLE}, p, agreement=0.2)  # block priced sooner, but answers worse
    assert (worse.mode, worse.rule) == (p.constrained_mode, "skeleton") and "expected to answer worse than AR (agreement 0.20" in worse.reason
    assert skeleton_route(None, None, p, agreement=0.2).mode == p.constrained_mode  # a quality signal: no profile needed
    assert skeleton_route(pricing, {"block": IDLE, "ar": IDLE}, p, agreement=0.8).mode == "block"


def test_skeleton_leaves_forced_modes_alone_at_any_load(model):
    p = policy(load_aware={"enabled": True})
    pricing = priced_router(model, p)
    for mode, view in (("block", {"block": BUSY, "ar": IDLE}), ("ar", {"block": IDLE, "ar": BUSY})):
        forced_ctx = ctx(req=SCHEMA, p=p, tokens=100, view=view, prices=pricing, forced=mode, forced_by="header", agreement=0.1)
        assert apply(forced_ctx).mode == mode


def test_skeleton_without_a_price_sends_block_as_before(model):
    busy_block = {"block": BUSY, "ar": IDLE}
    on = policy(load_aware={"enabled": True})
    unpriced = Pricing()  # the checkpoint ships no cost profile
    for p, pricing, view in ((on, unpriced, busy_block), (policy(load_aware={"enabled": False}), priced_router(model, on), busy_block),
                             (policy(load_aware={"enabled": True, "cost_aware": False}), priced_router(model, on), busy_block),
                             (on, priced_router(model, on), None)):
        move = skeleton_route(pricing, view, p)
        assert (move.mode, move.reason) == ("block", "earlier; the answer has a fixed skeleton (json_schema): skeleton_mode block")
    ar_first = policy(skeleton_mode="ar")  # an operator's skeleton_mode other than block is not priced
    assert skeleton_route(priced_router(model, ar_first), {"block": IDLE, "ar": BUSY}, ar_first).mode == "ar"


def test_grammar_sends_a_grammar_or_logprobs_to_constrained_mode():
    move = rules.grammar(ctx(req={"structured": "json_object"}, route=("block", "task_default")))
    assert (move.mode, move.rule) == (policy().constrained_mode, "constrained") and "follows a grammar (json_object)" in move.reason
    assert "logprobs" in rules.grammar(ctx(req={"logprobs": True}, route=("block", "task_default"))).reason
    assert rules.grammar(ctx(route=("block", "task_default"))) is None  # free text
    forced_block = ctx(req={"structured": "json_object"}, forced="block", forced_by="model", route=("block", "forced_model"))
    assert rules.grammar(forced_block).mode == policy().constrained_mode  # block follows a grammar only through a skeleton
    assert rules.grammar(ctx(req={"structured": "json_object"}, forced="verified", forced_by="model", route=("verified", "forced_model"))) is None


def test_apply_runs_the_rules_in_order_and_traces_every_move():
    out = apply(ctx(confidence=0.3, req={"structured": "json_object"}, p=policy(safe_mode="verified", constrained_mode="ar")))
    assert (out.mode, out.rule) == ("ar", "constrained")
    assert out.trace == ("task_default:block", "low_confidence:verified", "grammar:ar")
    assert [r.__name__ for r in RULES] == ["forced", "task_default", "long_output", "low_confidence", "disagreement",
                                          "load_spill", "cost_aware", "skeleton", "grammar"]


def test_decide_prices_a_skeleton_request_against_the_engines_view(model):
    p = policy(load_aware={"enabled": True}, agreement_floor=0.0)  # whatever the shipped head says: only the price decides
    router = Router(model=model, store=p)
    router.cost = priced_router(model, p).cost
    req = RouteRequest.from_prompt("Extract the name as JSON: Alice Smith.", structured="json_schema", skeleton=True, max_tokens=100)
    queued = router.decide(req, {"block": BUSY, "ar": IDLE})
    assert (queued.mode, queued.rule, queued.trace[-1], queued.load_aware) == ("ar", "skeleton", "skeleton:ar", True)
    assert "ms in block vs" in queued.reason
    busy_ar = router.decide(req, {"block": IDLE, "ar": BUSY})
    assert (busy_ar.mode, busy_ar.rule, busy_ar.trace[-1]) == ("block", "skeleton", "skeleton:block")
