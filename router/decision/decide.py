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
   the route (`Decision.trace`).
4. canvas = smallest canvas holding the length; steps per task; shadow_verify for a block
   decision when hash(request_id) falls under shadow_verify_rate (deterministic per request).

The policy is read from the store on every call (a pointer read; a file store stats at most
every check interval), so a new policy version applies to the next request. The cost-aware and
skeleton rules price modes here (`faster_at_equal_quality`, `priced_ms`), with the engines' cost
profile (`router.decision.pricing`). The Decision carries the policy, the prices and the draft key
it was made with, so the gateway's dispatch and failover follow them without asking the router again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from router.decision.layouts import engine_of
from router.decision.features import PromptSize, extract_features, prompt_size
from router.decision.live_costs import DraftKey
from router.decision.engine_view import EngineView
from router.decision.pricing import Pricing
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
        ctx = apply(RouteContext(req, policy, pred, tokens, prompt, override, forced, forced_by, view, pricing=self))
        mode, why = ctx.mode, ctx.reason
        canvas = policy.canvas_for(tokens) if mode != "ar" else None
        steps = policy.steps_for(pred.task) if mode != "ar" else None
        shadow = mode == "block" and policy.shadow_verify_rate > 0 and unit_draw(req.request_id) < policy.shadow_verify_rate
        if canvas is not None:
            why = f"{why}; p90 {tokens} tokens -> canvas {canvas}, {steps} steps"
        decision = Decision(
            mode=mode, canvas=canvas, steps=steps, reason=why, rule=ctx.rule, trace=list(ctx.trace), task=pred.task,
            predicted_tokens=int(tokens), confidence=round(pred.confidence, 4),
            agreement=None if pred.agreement is None else round(pred.agreement, 4),
            policy_version=policy.version, shadow_verify=shadow, forced_by=forced_by,
            load_aware=ctx.moved, request_id=req.request_id, structured=req.structured,
            prompt_tokens=prompt.tokens, prefix_tokens=prompt.head_tokens,
        )
        # what the request's dispatch and failover follow: this policy and these prices, not newer ones
        return decision.made_by(policy, Pricing(self.cost), DraftKey(pred.task, block_agrees(decision.agreement, policy)))

    def draft_key(self, decision: Decision) -> DraftKey:
        """What a decided request's verified draft share is counted and priced under (`Decision.draft_key`:
        by the policy snapshot that made the decision, so a newer agreement_floor does not re-key a request in flight)."""
        assert decision.draft_key is not None, "draft_key needs a decision made by Router.decide (it carries its policy)"
        return decision.draft_key

    def faster_at_equal_quality(self, mode: str, tokens: int, policy, task: str, view: Mapping[str, EngineView], prompt: PromptSize,
                                 block_agrees: bool = True):
        """(mode, gain, ms here, ms there) for the fastest mode of equal quality that is estimated at
        least `min_gain` times faster than `mode`, else None. Verified and AR count as equal
        (lossless); block joins them for the policy's equal_quality_tasks, within the policy's block
        limit (block_max_canvases). Where the agreement head expects block to differ from AR, block
        is out (it would answer worse), and verified is a way out only once the engines have seen
        what its drafts write for such requests of the task (a live `DraftShare`): the suite's
        acceptance says nothing of them, and by the head they would be rejected. Verified is never
        a way out where the live share of tokens its drafts wrote is under 1 - 1/min_gain: the rest
        are AR steps, so it cannot finish min_gain times sooner than AR however cheap its drafts,
        and an estimate that says so is calibration noise (hand-written prompts, share 0, were
        moved to verified at 1.3-2.3x "sooner" and took a median 1.11x (c1) and 1.16x (c8) AR's time in the same round)."""
        block_ok = block_agrees and task in policy.load_aware.equal_quality_tasks and tokens <= policy.block_limit_tokens
        # verified is AR's answer, but only pays where its drafts (block's) are AR's tokens
        share = getattr(view.get(engine_of(view, "verified")), "draft_share", {}).get(DraftKey(task, block_agrees))
        drafts_pay = block_agrees if share is None else share >= 1.0 - 1.0 / policy.load_aware.min_gain
        same = {"ar"} | ({"verified"} if drafts_pay else set()) | ({"block"} if block_ok else set())
        if mode not in same | {"verified"}:
            return None

        def estimate(m: str) -> float | None:
            return self.priced_ms(m, tokens, policy, task, view, prompt, block_agrees)

        def known(m: str) -> bool:
            """The profile prices an idle engine well, a busy one only roughly (two engines share the
            cores, canvases and drafts take turns): under load a mode is a way out only once that
            engine has answered requests of it in its present load (the first burst at concurrency
            8 moved reasoning to block by estimates 2x too kind: 4 s each where AR took ~2 s)."""
            e = view.get(engine_of(view, m))
            return e is None or e.idle or m in e.seen

        here = estimate(mode)
        options = [(there, m) for m in sorted(same - {mode}) if known(m) and (there := estimate(m)) is not None and there > 0]
        if here is None or not options:
            return None
        there, alt = min(options)
        gain = here / there
        return (alt, gain, here, there) if gain >= policy.load_aware.min_gain else None

    def priced_ms(self, mode: str, tokens: int, policy, task: str, view: Mapping[str, EngineView], prompt: PromptSize,
                  block_agrees: bool = True) -> float | None:
        """Milliseconds until a request would finish in `mode` now, as routing prices it: the cost
        profile's estimate behind the view's queue (`finish_estimate`, at the policy's steps and
        canvas for the task and length), made real by what that engine was observed to take
        (`EngineView.priced`). None without a profile or a reachable engine."""
        raw = self.finish_estimate(mode, tokens, policy.steps_for(task), policy.canvas_for(tokens), task, view, prompt, agrees=block_agrees)
        return None if raw is None else view[engine_of(view, mode)].priced(mode, task, raw)

    def finish_estimate(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None,
                        view: Mapping[str, EngineView] | None, prompt: PromptSize | None = None,
                        draft_share: float | None = None, agrees: bool = True) -> float | None:
        """`Pricing.finish_estimate` by the router's cost profile now (`router.decision.pricing`)."""
        return Pricing(self.cost).finish_estimate(mode, tokens, steps, canvas, task, view, prompt, draft_share, agrees)

    def status(self) -> dict:
        return {"policy": self.store.status(), "model": {k: self.model.meta.get(k) for k in ("feature_version", "data_sha256", "trained_at")}}

    def close(self) -> None:
        self.store.close()
