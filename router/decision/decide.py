"""`Router.decide(request)`: the learned model's prediction plus the live policy -> a Decision.

1. The policy is read once (a snapshot: every rule, and what happens to the request later,
   failover included, follows that version; `Decision.policy`), and the request's forcing is
   checked against it (`rules.forcing`: a model the policy does not serve is a 404, a bad or
   conflicting mode header a 400, forcing the policy does not allow a 403).
2. Prediction: task type, its calibrated probability, p90 answer length (capped by max_tokens),
   and (a router retrained on shadow verification) the agreement of block's answer with AR's.
3. The routing rules (`router.decision.rules.RULES`, in order: forced, task_default, long_output,
   low_confidence, disagreement, load_spill, cost_aware, skeleton, grammar) turn that into a
   mode, the rule that had the last word (`Decision.rule`) and the trace of every rule that moved
   the route (`Decision.trace`). The rules price modes with a `Pricing` (router.decision.pricing), never
   with the Router itself.
4. canvas = smallest canvas holding the length; steps per task; shadow_verify for a block
   decision when hash(request_id) falls under shadow_verify_rate (deterministic per request).

The policy is read from the store on every call (a pointer read; a file store stats at most
every check interval), so a new policy version applies to the next request. The cost-aware and
skeleton rules price modes with the `Pricing` of the engines' cost profile at decision time
(`router.decision.pricing`). The Decision carries the policy, the prices and the draft key it was
made with (set when it is built), so the gateway's dispatch and failover follow them without asking the router again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from router.decision.features import PromptSize, extract_features, prompt_size
from router.decision.live_costs import DraftKey
from router.decision.engine_view import EngineView
from router.decision.pricing import PriceQuery, Pricing
from router.decision.rules import RouteContext, apply, block_agrees, forcing
from router.decision.types import Decision, Prediction, RouteRequest

def unit_draw(request_id: str) -> float:
    """A uniform number in [0, 1) fixed by the request id (same id, same draw, in every replica)."""
    return int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest(), "big") / 2.0**64


class OwnCost:
    """A cost profile a Router holds itself, where no routing view fetches one for it."""

    cost = None  # an engines.cost.CostProfile once set


class Router:
    """Routes requests with a learned model and a policy store.

    `model`: a `router.decision.classifier.RouterModel` (default: the shipped router/decision/models/default.skops).
    `store`: a `policies.PolicyStore`, a `Policy` (held in memory), or None for
    `policies.load_store(policy_source)` ($TANDEM_POLICY_SOURCE or policies/default.yaml).
    `costs`: what holds the engines' cost profile the router prices modes with (its `cost`): the
    gateway's `router.decision.routing_view.RoutingView`, which fetches it from the engines; None:
    the router holds its own (`OwnCost`: none until one is set, as the lab's tools and tests do)."""

    def __init__(self, model=None, store=None, *, model_path=None, policy_source: str | None = None, costs=None, **store_kwargs):
        from policies.schema import Policy
        from policies.stores import MemoryStore, load_store

        if model is None:
            from router.decision.classifier import load_model

            model = load_model(model_path)
        self.model = model
        if store is None:
            store = load_store(policy_source, **store_kwargs)
        elif isinstance(store, Policy):
            store = MemoryStore(store)
        self.store = store
        self.costs = costs if costs is not None else OwnCost()

    @property
    def cost(self):
        """The engines' cost profile (`engines.cost.CostProfile`; None: the checkpoint ships none, or it
        has not been fetched yet), read from `costs` at every decision. Setting it sets the holder's."""
        return self.costs.cost

    @cost.setter
    def cost(self, profile) -> None:
        self.costs.cost = profile

    @property
    def policy(self):
        return self.store.current()

    def predict(self, request: RouteRequest) -> Prediction:
        f = extract_features(request.messages, request.max_tokens, request.response_format, request.tools, request.stop)
        return self.model.predict(f)

    def decide(self, request: RouteRequest | dict[str, Any], view: Mapping[str, EngineView] | None = None) -> Decision:
        """The decision for one request. `view` maps an engine ("block", "ar"; "shared" in the shared
        layout, `router.decision.layouts`) to what routing knows
        of it now (`router.decision.engine_view.EngineView`), read only when the policy's load_aware is
        enabled: its queue ratio for spilling, its occupancy, backlog and calibration with
        `self.cost` (an `engines.cost.CostProfile`) when load_aware.cost_aware is on. Raises a
        RouterError (router.decision.errors) for refused requests."""
        req = request if isinstance(request, RouteRequest) else RouteRequest.model_validate(request)
        policy = self.store.current()
        override = policy.key_override(req.api_key)
        forced, forced_by = forcing(req, policy, override)
        pred = self.predict(req)
        tokens = min(pred.predicted_tokens, req.max_tokens) if req.max_tokens else pred.predicted_tokens
        prompt = prompt_size(req.messages, req.tools)
        prices = Pricing(self.cost)  # the profile now: the rules, the dispatch and failover price by this one
        ctx = apply(RouteContext(req, policy, pred, tokens, prompt, override, forced, forced_by, view, prices=prices))
        mode, why = ctx.mode, ctx.reason
        canvas = policy.canvas_for(tokens) if mode != "ar" else None
        steps = policy.steps_for(pred.task) if mode != "ar" else None
        shadow = mode == "block" and policy.shadow_verify_rate > 0 and unit_draw(req.request_id) < policy.shadow_verify_rate
        if canvas is not None:
            why = f"{why}; p90 {tokens} tokens -> canvas {canvas}, {steps} steps"
        agreement = None if pred.agreement is None else round(pred.agreement, 4)
        # what the request's dispatch and failover follow: this policy and these prices, not newer ones
        return Decision(
            policy=policy, prices=prices, draft_key=DraftKey(pred.task, block_agrees(agreement, policy)),
            mode=mode, canvas=canvas, steps=steps, reason=why, rule=ctx.rule, trace=list(ctx.trace), task=pred.task,
            predicted_tokens=int(tokens), confidence=round(pred.confidence, 4),
            agreement=agreement,
            policy_version=policy.version, shadow_verify=shadow, forced_by=forced_by,
            load_aware=ctx.moved, request_id=req.request_id, structured=req.structured,
            prompt_tokens=prompt.tokens, prefix_tokens=prompt.head_tokens,
        )

    def draft_key(self, decision: Decision) -> DraftKey:
        """What a decided request's verified draft share is counted and priced under (`Decision.draft_key`)."""
        assert decision.draft_key is not None, "draft_key needs a decision made by Router.decide (it carries its policy)"
        return decision.draft_key

    # Prices by the router's cost profile now (router.decision.pricing), for tests and the lab's tools;
    # `decide` hands the rules one `Pricing` and puts it on the Decision.
    def faster_at_equal_quality(self, mode: str, tokens: int, policy, task: str, view: Mapping[str, EngineView], prompt: PromptSize,
                                block_agrees: bool = True):
        """`Pricing.faster_at_equal_quality` by the router's cost profile now."""
        return Pricing(self.cost).faster_at_equal_quality(mode, tokens, policy, task, view, prompt, block_agrees)

    def priced_ms(self, mode: str, tokens: int, policy, task: str, view: Mapping[str, EngineView], prompt: PromptSize,
                  block_agrees: bool = True) -> float | None:
        """`Pricing.priced_ms` by the router's cost profile now, at the policy's steps and canvas."""
        prices = Pricing(self.cost)
        return prices.priced_ms(prices.at_policy(mode, tokens, policy, task, prompt, block_agrees), view)

    def finish_estimate(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None,
                        view: Mapping[str, EngineView] | None, prompt: PromptSize | None = None) -> float | None:
        """`Pricing.finish_estimate` by the router's cost profile now."""
        return Pricing(self.cost).finish_estimate(PriceQuery(mode, tokens, steps, canvas, task, prompt or PromptSize(0, 0)), view)

    def status(self) -> dict:
        return {"policy": self.store.status(), "model": {k: self.model.meta.get(k) for k in ("feature_version", "data_sha256", "trained_at")}}

    def close(self) -> None:
        self.store.close()
