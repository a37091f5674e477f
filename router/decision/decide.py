"""`Router.decide(request)`: the learned model's prediction plus the live policy -> a Decision.

Order of the rules (each named in `Decision.rule`):

1. Forcing. The model alias must be one the policy serves (else 400 model_not_found); a
   `x-tandem-mode` header (name set by the policy) must say auto/block/verified/ar (else 400).
   An API key with `force_mode` wins over anything the client asks (`api_key`). Otherwise a
   forcing alias (`forced_model`) or header (`forced_header`) is honoured if the policy (or the
   key's `allow_forcing`) allows it and the mode is in `allowed_modes`, else 403. Alias and header
   asking for different modes is a 400.
2. Prediction: task type, its calibrated probability, p90 answer length (capped by max_tokens).
3. `task_default`: the key's task_modes over the policy's task_modes (fallback_mode if absent).
4. `long_output`: block with a predicted length over block_max_canvases x largest canvas -> long_mode.
5. `low_confidence`: block with confidence under the floor (the key's, else the policy's) -> safe_mode.
   `disagreement`: block that the router's agreement head (the checkpoint's labels on the data
   set, logged shadow verification) expects to answer worse than AR (agreement under the policy's
   agreement_floor) -> safe_mode; verified under the same expectation -> ar (its drafts are
   block's denoiser: they are mostly rejected, and AR steps write AR's answer sooner alone).
6. `load`: with load_aware enabled and queue ratios given, an overloaded mode spills to the
   first mode in spill_order under max_queue_ratio; then, with cost_aware and a cost profile, the
   request moves to a mode of equal quality estimated min_gain times faster (verified <-> AR
   always, but to verified under `disagreement` only once the engines have seen what drafts write
   for such requests of the task, and priced by that, and never to verified where the live draft
   share is under 1 - 1/min_gain; block <-> AR for equal_quality_tasks, within the block limit).
   Forced modes never move.
7. `skeleton` / `constrained`: an answer with a skeleton (a json_schema, a tool call that must be
   made, or tool_choice auto without a JSON response_format: an optional skeleton) goes to
   skeleton_mode unless forced (block seeds its canvas with the skeleton: `engines.seeded`; under
   auto once the model begins a call). Any other answer under a grammar (a json_object, auto with
   a JSON response_format), or one with logprobs, goes to constrained_mode unless a forced verified/ar says
   otherwise; a forced block goes there too: block mode follows a grammar only through a
   skeleton, and its tokens are not drawn from the AR distribution that logprobs describe. (Verified drafts that ignore the grammar are mostly
   rejected, so constrained verified costs several times AR's model calls: `bench structured`.)
8. canvas = smallest canvas holding the length; steps per task; shadow_verify for a block
   decision when hash(request_id) falls under shadow_verify_rate (deterministic per request).

The policy is read from the store on every call (a pointer read; a file store stats at most
every check interval), so a new policy version applies to the next request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from engines.defaults import MIN_PREFIX_TOKENS
from engines.types import MODES
from router.decision.layouts import engine_of
from router.decision.errors import BadRouteError, ModelNotFoundError, RouteForbiddenError
from router.decision.features import PromptSize, extract_features, prompt_size
from router.decision.live_costs import DraftKey
from router.decision.routing_view import EngineView
from router.decision.types import Decision, Prediction, RouteRequest

_FORCED_RULES = {"model": "forced_model", "header": "forced_header", "api_key": "api_key"}


def unit_draw(request_id: str) -> float:
    """A uniform number in [0, 1) fixed by the request id (same id, same draw, in every replica)."""
    return int.from_bytes(hashlib.blake2b(request_id.encode(), digest_size=8).digest(), "big") / 2.0**64


class Router:
    """Routes requests with a learned model and a policy store.

    `model`: a `router.decision.classifier.RouterModel` (default: the shipped router/decision/models/default.skops).
    `store`: a `policies.PolicyStore`, a `Policy` (held in memory), or None for
    `policies.load_store(policy_source)` ($TANDEM_POLICY_SOURCE or policies/default.yaml)."""

    def __init__(self, model=None, store=None, *, model_path=None, policy_source: str | None = None, **store_kwargs):
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
        self.cost = None  # a engines.cost.CostProfile, set by the gateway when the checkpoint ships one

    @property
    def policy(self):
        return self.store.current()

    def predict(self, request: RouteRequest) -> Prediction:
        f = extract_features(request.messages, request.max_tokens, request.response_format, request.tools, request.stop)
        return self.model.predict(f)

    def decide(self, request: RouteRequest | dict[str, Any], view: Mapping[str, EngineView] | None = None) -> Decision:
        """The decision for one request. `view` maps an engine ("block", "ar"; "shared" in the shared
        layout, `router.decision.layouts`) to what routing knows
        of it now (`router.decision.routing_view.EngineView`), read only when the policy's load_aware is
        enabled: its queue ratio for spilling, its occupancy, backlog and calibration with
        `self.cost` (an `engines.cost.CostProfile`) when load_aware.cost_aware is on. Raises a
        RouterError (router.decision.errors) for refused requests."""
        req = request if isinstance(request, RouteRequest) else RouteRequest.model_validate(request)
        policy = self.store.current()
        override = policy.key_override(req.api_key)
        forced, forced_by = self._forced(req, policy, override)

        pred = self.predict(req)
        tokens = min(pred.predicted_tokens, req.max_tokens) if req.max_tokens else pred.predicted_tokens
        task, conf = pred.task, pred.confidence
        prompt = prompt_size(req.messages, req.tools)
        moved = False
        if forced is not None:
            mode, rule = forced, _FORCED_RULES[forced_by]
            why = {"model": f"model {req.model!r} forces {mode}", "header": f"header {policy.forcing.header} forces {mode}",
                   "api_key": f"API key override forces {mode}"}[forced_by]
        else:
            mode, rule = policy.route_for(task, tokens, override.task_modes if override else None)
            if rule == "long_output":
                why = f"task {task} defaults to block but p90 {tokens} tokens > block limit {policy.block_limit_tokens}; {mode}"
            else:
                src = "key task_modes" if override and task in override.task_modes else "task_modes"
                why = f"task {task} -> {mode} ({src})"
            floor = override.confidence_floor if override and override.confidence_floor is not None else policy.confidence_floor
            if mode == "block" and conf < floor:
                mode, rule = policy.safe_mode, "low_confidence"
                why = f"task {task} at confidence {conf:.2f} < floor {floor:.2f}; safe mode {mode}"
            elif mode == "block" and not self._block_agrees(pred, policy):
                mode, rule = policy.safe_mode, "disagreement"
                why = f"{why}; block expected to answer worse than AR (agreement {pred.agreement:.2f} < {policy.agreement_floor:.2f}); safe mode {mode}"
            elif mode == "verified" and not self._block_agrees(pred, policy):
                # verified's drafts are block's denoiser: where block is expected to write something
                # else than AR, its drafts are rejected and it writes AR's answer by AR steps, slower
                mode, rule = "ar", "disagreement"
                why = f"{why}; its drafts expected to miss AR's answer (agreement {pred.agreement:.2f} < {policy.agreement_floor:.2f}); ar"
            la = policy.load_aware
            ratio = lambda m: view[engine_of(view, m)].queue_ratio if view and engine_of(view, m) in view else 0.0  # noqa: E731
            if la.enabled and view and ratio(mode) > la.max_queue_ratio:
                for alt in la.spill_order:
                    if alt != mode and ratio(alt) <= la.max_queue_ratio:
                        why = f"{why}; {mode} queue at {ratio(mode):.2f} > {la.max_queue_ratio:.2f}, spilled to {alt}"
                        mode, rule, moved = alt, "load", True
                        break
            if la.enabled and la.cost_aware and self.cost is not None and view:
                faster = self._faster_at_equal_quality(mode, tokens, policy, task, view, prompt, self._block_agrees(pred, policy))
                if faster is not None:
                    alt, gain, ms_here, ms_there = faster
                    why = f"{why}; est. {ms_here:.0f} ms in {mode} vs {ms_there:.0f} ms in {alt} ({gain:.1f}x), moved to {alt}"
                    mode, rule, moved = alt, "load", True
        seedable = bool(req.structured and req.skeleton and not req.logprobs)  # every mode can serve it, block by seeding
        if seedable:
            if forced is None and mode != policy.skeleton_mode:
                mode, rule = policy.skeleton_mode, "skeleton"
                why = f"{why}; the answer has a fixed skeleton ({req.structured}): skeleton_mode {mode}"
        elif (req.structured or req.logprobs) and mode != policy.constrained_mode and (mode == "block" or forced is None):
            mode, rule = policy.constrained_mode, "constrained"
            need = f"the answer follows a grammar ({req.structured})" if req.structured else "logprobs need the AR distribution"
            why = f"{why}; {need}: constrained_mode {mode}"
        canvas = policy.canvas_for(tokens) if mode != "ar" else None
        steps = policy.steps_for(task) if mode != "ar" else None
        shadow = mode == "block" and policy.shadow_verify_rate > 0 and unit_draw(req.request_id) < policy.shadow_verify_rate
        if canvas is not None:
            why = f"{why}; p90 {tokens} tokens -> canvas {canvas}, {steps} steps"
        return Decision(
            mode=mode, canvas=canvas, steps=steps, reason=why, rule=rule, task=task, predicted_tokens=int(tokens),
            confidence=round(conf, 4), agreement=None if pred.agreement is None else round(pred.agreement, 4),
            policy_version=policy.version, shadow_verify=shadow, forced_by=forced_by,
            load_aware=moved, request_id=req.request_id, structured=req.structured,
            prompt_tokens=prompt.tokens, prefix_tokens=prompt.head_tokens,
        ).made_by(policy)

    @staticmethod
    def _block_agrees(pred: Prediction | Decision, policy) -> bool:
        """Whether block's answer is expected to be AR's: always, unless the model has an agreement
        head (trained on logged shadow verification) that says otherwise."""
        return pred.agreement is None or pred.agreement >= policy.agreement_floor

    def draft_key(self, decision: Decision) -> DraftKey:
        """What a decided request's verified draft share is counted and priced under."""
        return DraftKey(decision.task, self._block_agrees(decision, decision.policy or self.policy))

    def _faster_at_equal_quality(self, mode: str, tokens: int, policy, task: str, view: Mapping[str, EngineView], prompt: PromptSize,
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
        steps, canvas = policy.steps_for(task), policy.canvas_for(tokens)

        def estimate(m: str) -> float | None:
            raw = self.finish_estimate(m, tokens, steps, canvas, task, view, prompt, agrees=block_agrees)
            return None if raw is None else view[engine_of(view, m)].priced(m, task, raw)

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

    def finish_estimate(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None,
                        view: Mapping[str, EngineView] | None, prompt: PromptSize | None = None,
                        draft_share: float | None = None, agrees: bool = True) -> float | None:
        """Milliseconds until a request would finish in `mode` given the view, by the cost profile
        alone (None without a profile or a reachable engine); `decide` applies the calibration.
        The prompt's prefill is priced less what the engine's prefix cache is expected to hold:
        its head (all but the last message) times the share of prefix tokens that engine has reused.
        Verified is priced by the share of its tokens drafts wrote lately for the task and the
        agreement head's expectation (`agrees`: block expected to answer as AR), once known (or by
        `draft_share` when given: what one finished request's drafts wrote)."""
        e = view.get(engine_of(view, mode)) if view else None
        if self.cost is None or e is None or not e.reachable:
            return None
        prompt = prompt or PromptSize(0, 0)
        cached = expected_cached_tokens(prompt, e)
        return self.cost.finish_ms(mode, max(1, tokens), steps, canvas or self.cost.canvas, e.queued, e.running, max(1, e.capacity),
                                   task, backlog_ms=e.backlog_ms, prompt_tokens=prompt.tokens, cached_tokens=cached,
                                   draft_share=draft_share if draft_share is not None else e.draft_share.get(DraftKey(task, agrees)) if task else None)

    @staticmethod
    def _forced(req: RouteRequest, policy, override) -> tuple[str | None, str | None]:
        rules = policy.forcing
        target = rules.model_aliases.get(req.model)
        if target is None:
            served = ", ".join(sorted(rules.model_aliases))
            raise ModelNotFoundError(f"model {req.model!r} is not served here; available: {served}", param="model")
        header_mode = None
        for name, value in req.headers.items():
            if name.lower() == rules.header:
                v = str(value).strip().lower()
                if v not in MODES and v != "auto":
                    raise BadRouteError(f"header {rules.header} must be auto, block, verified or ar; got {str(value)[:32]!r}", param=rules.header,
                                        code="invalid_mode_header")  # a header's value is echoed cut: it may be kilobytes
                header_mode = None if v == "auto" else v
                break
        if override is not None and override.force_mode is not None:
            return override.force_mode, "api_key"
        model_mode = None if target == "auto" else target
        if model_mode and header_mode and model_mode != header_mode:
            raise BadRouteError(f"model {req.model!r} forces {model_mode} but header {rules.header} asks for {header_mode}", param=rules.header, code="conflicting_mode")
        key_allows = override.allow_forcing if override is not None else None
        if model_mode:
            if not (rules.allow_model_alias if key_allows is None else key_allows):
                raise RouteForbiddenError(f"this policy does not let model {req.model!r} force a mode; use an auto alias", param="model", code="mode_forcing_disabled")
            if model_mode not in rules.allowed_modes:
                raise RouteForbiddenError(f"forcing {model_mode} is not allowed; allowed: {', '.join(rules.allowed_modes)}", param="model", code="mode_not_allowed")
            return model_mode, "model"
        if header_mode:
            if not (rules.allow_header if key_allows is None else key_allows):
                raise RouteForbiddenError(f"this policy does not accept the {rules.header} header", param=rules.header, code="mode_header_disabled")
            if header_mode not in rules.allowed_modes:
                raise RouteForbiddenError(f"forcing {header_mode} is not allowed; allowed: {', '.join(rules.allowed_modes)}", param=rules.header, code="mode_not_allowed")
            return header_mode, "header"
        return None, None

    def status(self) -> dict:
        return {"policy": self.store.status(), "model": {k: self.model.meta.get(k) for k in ("feature_version", "data_sha256", "trained_at")}}

    def close(self) -> None:
        self.store.close()


def expected_cached_tokens(prompt: PromptSize, engine: EngineView) -> float:
    """Prompt tokens an engine's prefix cache is expected to hold: the head (all but the last
    message) times the share of prefix tokens it has reused so far; heads under MIN_PREFIX_TOKENS
    are never cached."""
    return prompt.head_tokens * engine.prefix_reuse if prompt.head_tokens >= MIN_PREFIX_TOKENS else 0.0
