"""Router.decide: every policy rule, forcing and its refusals, per-key overrides, shadow
verification, load-aware routing, and hot policy changes - with the real shipped model."""

from __future__ import annotations

import hashlib

import pytest

from policies.schema import DEFAULT_TASK_MODES
from policies.stores import MemoryStore, default_policy
from router import Decision, RouteRequest, Router, RouterError
from tests.router.helpers import ESSAY, EXTRACT, SUM, policy, req


def test_task_default_picks_mode_canvas_and_steps(route):
    d = route().decide(req())
    assert isinstance(d, Decision)
    assert (d.mode, d.rule, d.task, d.steps) == ("block", "task_default", "extract", 12)
    assert d.confidence >= 0.5 and d.policy_version == 0
    assert d.canvas == min(c for c in (64, 128, 256) if c >= d.predicted_tokens)
    assert "extract" in d.reason and str(d.canvas) in d.reason
    e = route().decide(req(ESSAY))
    assert (e.mode, e.task, e.canvas, e.steps) == ("ar", "write", None, None)
    assert route().decide(req(SUM)).task == "reason"


def test_long_predicted_answer_leaves_block_mode(route):
    d = route(canvas_sizes=[8, 16], long_mode="verified").decide(req())
    assert d.predicted_tokens > 16
    assert (d.mode, d.rule, d.canvas) == ("verified", "long_output", 16)
    assert route(canvas_sizes=[8, 16], block_max_canvases=64).decide(req()).mode == "block"


def test_max_tokens_caps_the_predicted_length_and_canvas(route):
    d = route().decide(req(max_tokens=20))
    assert d.predicted_tokens <= 20 and d.canvas == 64


def test_low_confidence_uses_the_safe_mode(route):
    d = route(confidence_floor=0.999, safe_mode="ar").decide(req())
    assert (d.mode, d.rule) == ("ar", "low_confidence")
    assert "floor" in d.reason
    # only block decisions are made safe: AR and verified already are
    assert route(confidence_floor=1.0).decide(req(ESSAY)).rule == "task_default"


def test_steps_per_task(route):
    assert route(steps=8, steps_by_task={"extract": 24}).decide(req()).steps == 24
    assert route(steps=8, steps_by_task={"code": 24}).decide(req()).steps == 8


def test_task_modes_map_is_the_policys(route):
    assert route(task_modes={**default_policy().task_modes, "extract": "verified"}).decide(req()).mode == "verified"


@pytest.mark.parametrize("alias, mode", [("tandem-block", "block"), ("tandem-verified", "verified"), ("tandem-ar", "ar")])
def test_model_alias_forces_a_mode(route, alias, mode):
    d = route().decide(req(ESSAY, model=alias))
    assert (d.mode, d.rule, d.forced_by) == (mode, "forced_model", "model")


def test_header_forces_a_mode_case_insensitively(route):
    d = route().decide(req(headers={"X-Tandem-Mode": "AR"}))
    assert (d.mode, d.rule, d.forced_by) == ("ar", "forced_header", "header")
    assert route().decide(req(headers={"x-tandem-mode": "auto"})).rule == "task_default"


def refusal(router, request) -> RouterError:
    with pytest.raises(RouterError) as exc:
        router.decide(request)
    return exc.value


def test_refusals_carry_status_code_and_param(route):
    e = refusal(route(), req(model="gpt-4o"))
    assert (e.status, e.code, e.param) == (404, "model_not_found", "model")
    assert e.body()["error"]["type"] == "invalid_request_error"
    e = refusal(route(), req(headers={"x-tandem-mode": "turbo"}))
    assert (e.status, e.code, e.param) == (400, "invalid_mode_header", "x-tandem-mode")
    e = refusal(route(), req(model="tandem-block", headers={"x-tandem-mode": "ar"}))
    assert (e.status, e.code) == (400, "conflicting_mode")
    forcing = default_policy().forcing.model_dump()
    e = refusal(route(forcing={**forcing, "allow_model_alias": False}), req(model="tandem-ar"))
    assert (e.status, e.code) == (403, "mode_forcing_disabled")
    assert e.body()["error"]["type"] == "permission_error"
    e = refusal(route(forcing={**forcing, "allow_header": False}), req(headers={"x-tandem-mode": "ar"}))
    assert (e.status, e.code, e.param) == (403, "mode_header_disabled", "x-tandem-mode")
    e = refusal(route(forcing={**forcing, "allowed_modes": ["verified", "ar"]}), req(model="tandem-block"))
    assert (e.status, e.code) == (403, "mode_not_allowed")
    # a renamed header is the one that counts
    r = route(forcing={**forcing, "header": "X-Route"})
    assert r.decide(req(headers={"x-route": "ar"})).mode == "ar"
    assert r.decide(req(headers={"x-tandem-mode": "ar"})).mode == "block"


def test_api_key_overrides(route):
    digest = "sha256:" + hashlib.sha256(b"team-a-key").hexdigest()
    forcing = default_policy().forcing.model_dump()
    r = route(
        forcing={**forcing, "allow_model_alias": False},
        api_keys={
            digest: {"force_mode": "ar"},
            "team-b": {"task_modes": {"extract": "verified"}},
            "team-c": {"allow_forcing": True},
            "team-d": {"confidence_floor": 1.0},
        },
    )
    d = r.decide(req(api_key="team-a-key", model="tandem-block"))  # the key's forcing wins over the client's ask
    assert (d.mode, d.rule, d.forced_by) == ("ar", "api_key", "api_key")
    assert r.decide(req(api_key="team-b")).mode == "verified"
    assert r.decide(req(api_key="team-c", model="tandem-ar")).mode == "ar"  # allowed for this key only
    assert refusal(r, req(api_key="someone-else", model="tandem-ar")).status == 403
    assert r.decide(req(api_key="team-d")).rule == "low_confidence"
    assert r.decide(req(api_key="nobody")).mode == "block"


def test_shadow_verify_is_deterministic_per_request_and_follows_the_rate(route):
    r = route(shadow_verify_rate=0.3)
    draws = [r.decide(req(request_id=f"req-{i}")).shadow_verify for i in range(400)]
    assert 0.22 < sum(draws) / len(draws) < 0.38
    again = [r.decide(req(request_id=f"req-{i}")).shadow_verify for i in range(400)]
    assert draws == again  # same request id, same draw (in any replica)
    assert not any(route(shadow_verify_rate=0.0).decide(req(request_id=f"q{i}")).shadow_verify for i in range(50))
    assert all(route(shadow_verify_rate=1.0).decide(req(request_id=f"q{i}")).shadow_verify for i in range(50))
    assert not route(shadow_verify_rate=1.0).decide(req(ESSAY)).shadow_verify  # only block answers


def test_load_aware_routing_can_be_switched_off_and_spills_when_on(route):
    from router.decision.engine_view import EngineView

    full_block = {"block": EngineView(queue_ratio=0.95), "ar": EngineView(queue_ratio=0.2)}
    d = route(load_aware={"enabled": False}).decide(req(), full_block)
    assert (d.mode, d.load_aware) == ("block", False)
    on = route(load_aware={"enabled": True, "max_queue_ratio": 0.8, "spill_order": ["verified", "ar"]})
    d = on.decide(req(), full_block)  # verified shares the block engine's queue: AR takes it
    assert (d.mode, d.rule, d.load_aware) == ("ar", "load", True)
    assert on.decide(req(), {"block": EngineView(queue_ratio=0.95), "ar": EngineView(queue_ratio=0.9)}).mode == "block"  # nowhere better
    assert on.decide(req(), {"block": EngineView(queue_ratio=0.95), "ar": EngineView(queue_ratio=1.0, reachable=False)}).mode == "block"
    assert on.decide(req(model="tandem-block"), full_block).mode == "block"  # forced never moves
    assert on.decide(req(), {"block": EngineView(queue_ratio=0.1), "ar": EngineView(queue_ratio=0.95)}).mode == "block"


def test_a_new_policy_version_applies_to_the_next_request(model):
    store = MemoryStore(policy())
    r = Router(model=model, store=store)
    assert r.decide(req()).mode == "block"
    p = store.current()
    store.apply({**p.content(), "task_modes": {**p.task_modes, "extract": "ar"}})
    d = r.decide(req())
    assert (d.mode, d.policy_version) == ("ar", 1)


def test_request_accepts_openai_shapes(route):
    body = {
        "model": "tandem",
        "messages": [
            {"role": "system", "content": "You extract data."},
            {"role": "user", "content": [{"type": "text", "text": EXTRACT}]},
        ],
        "stop": "###",
        "temperature": 0.2,  # ignored: not a routing input
        "response_format": {"type": "json_object"},
    }
    d = route().decide(body)
    assert d.task == "extract" and d.mode == "block"
    assert RouteRequest.model_validate(body).stop == ["###"]
    with pytest.raises(ValueError):
        RouteRequest.model_validate({"messages": []})


@pytest.mark.parametrize("mode", ["block", "verified", "ar"])
def test_a_request_ar_can_serve_fits_whatever_mode_routing_picks(route, engine, mode):
    # Auto routing must not turn a request AR would answer into a 400. The router does not count
    # tokens; the engine's context limit is the same in every mode (prompt + max_tokens: block and
    # verified size a canvas down near the end of the context), so any decision fits. A short prompt
    # asking for the whole rest of the context used to be refused once routing picked block/verified.
    from dataclasses import replace

    from engines import ContextLengthError, GenerationRequest

    messages = [{"role": "user", "content": EXTRACT}]
    max_tokens = engine.context_length - len(engine.prompt_ids(GenerationRequest(messages=messages)))
    d = route(task_modes={**DEFAULT_TASK_MODES, "extract": mode}).decide(req(max_tokens=max_tokens))
    assert (d.mode, d.rule) == (mode, "task_default")
    canvas = min(d.canvas, engine.config.canvas_length) if d.canvas else None  # the gateway caps it so
    request = GenerationRequest(messages=messages, mode=d.mode, max_new_tokens=max_tokens, canvas=canvas, max_denoising_steps=d.steps)
    engine.validate(request)
    with pytest.raises(ContextLengthError):  # one token more does not fit, in any mode
        engine.validate(replace(request, max_new_tokens=max_tokens + 1))


def test_an_answer_with_a_skeleton_goes_to_skeleton_mode_and_other_grammars_to_constrained_mode(route):
    router = route(skeleton_mode="block", constrained_mode="ar")
    assert router.decide(req(structured="json_schema", skeleton=True)).mode == "block"
    moved = router.decide(req(ESSAY, structured="json_schema", skeleton=True))  # a task that would go to AR
    assert (moved.mode, moved.rule) == ("block", "skeleton") and "fixed skeleton" in moved.reason
    free = router.decide(req(structured="json_object"))
    assert (free.mode, free.rule) == ("ar", "constrained")
    # logprobs need the AR distribution even with a skeleton; a forced mode is kept
    assert router.decide(req(structured="json_schema", skeleton=True, logprobs=True)).mode == "ar"
    assert route(skeleton_mode="ar").decide(req(structured="json_schema", skeleton=True, model="tandem-verified")).mode == "verified"


def test_a_decision_keeps_the_policy_that_made_it(route):
    """What happens to a request after its decision (failover's on_engine_failure, the agreement
    floor its drafts are priced under) follows the policy that routed it, not a newer one."""
    router = route(on_engine_failure={"block": "ar", "verified": "ar", "ar": "verified"}, agreement_floor=0.0)
    decision = router.decide(req())
    before = decision.policy
    assert before is not None and before.version == decision.policy_version
    newer = before.content() | {"on_engine_failure": {"block": "verified", "verified": "ar", "ar": "verified"}, "agreement_floor": 1.0}
    router.store.apply(newer, expect_version=before.version)
    assert router.policy.version > before.version and router.policy.on_engine_failure["block"] == "verified"
    assert decision.policy.on_engine_failure["block"] == "ar", "the snapshot did not move with the store"
    decision.agreement = 0.5  # under the newer floor (1.0) block would not agree; under the deciding one (0.0) it does
    assert decision.draft_key.agrees
    assert "policy" not in decision.model_dump() and "_policy" not in decision.model_dump_json()


def test_the_trace_says_how_the_route_came_about(route):
    d = route(safe_mode="verified", constrained_mode="ar", confidence_floor=1.0).decide(req(structured="json_object"))
    assert (d.mode, d.rule, d.trace) == ("ar", "constrained", ["task_default:block", "low_confidence:verified", "grammar:ar"])
    assert d.headers()["x-tandem-route-trace"] == "task_default:block,low_confidence:verified,grammar:ar"
    forced = route().decide(req(model="tandem-ar"))
    assert forced.trace == ["forced:ar"] and forced.headers()["x-tandem-route-reason"] == "forced_model"
