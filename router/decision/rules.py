"""The routing rules: one ordered tuple (`RULES`) of small named functions `(RouteContext) -> Move | None`.

`Router.decide` (router.decision.decide) predicts, builds a `RouteContext` and hands it through
`RULES` in order (`apply`): each rule reads the request, the policy snapshot, the prediction and
the route so far, and either moves the route (a `Move`: a mode, the `Decision.rule` label, the
reason) or leaves it. Every rule that moves it is recorded in the context's `trace`
(`name:mode`), which the decision carries to the `x-tandem-route-trace` header, the console and
the decisions log, so they can say how a route came about and not only which rule had the last word.

The rules, in order (docs/policies.md says what each policy field means):

1. `forced`: a mode forced by an API key, a model alias or the mode header (`forcing` checks the
   request against the policy first, and refuses with a 400/403). A forced mode never moves again,
   except to a grammar a forced block cannot follow (`grammar`).
2. `task_default`: the key's task_modes over the policy's (fallback_mode if absent).
3. `long_output`: block with a predicted length past the block limit -> long_mode.
4. `low_confidence`: block at a confidence under the floor (the key's, else the policy's) -> safe_mode.
5. `disagreement`: the agreement head expects block to answer worse than AR: a first-choice block
   -> safe_mode; a first-choice verified -> ar (its drafts are block's denoiser: mostly rejected,
   and AR steps write AR's answer sooner alone).
6. `load_spill`: with load_aware on, a mode whose queue ratio is past max_queue_ratio spills to
   the first mode in spill_order under it.
7. `cost_aware`: with load_aware.cost_aware and a cost profile, a mode of equal quality estimated
   min_gain times faster (`Pricing.faster_at_equal_quality` says which modes count as equal).
8. `skeleton`: an answer with a fixed skeleton (a json_schema, a tool to call), unless forced, goes
   to skeleton_mode (block seeds its canvas with the skeleton: `engines.modes.seeded`), but block only
   while the agreement head does not expect it to answer worse than AR and, where cost_aware can
   price modes (`priceable`: load_aware.cost_aware, a view and a cost profile), while it is expected
   to finish no later than constrained_mode at the current load; otherwise constrained_mode, whose
   answer the grammar keeps valid. Unpriced (no profile, load_aware or cost_aware off), block
   wherever the head agrees, as before; a skeleton_mode other than block is taken as written. It
   always records its choice (`skeleton:<mode>`, with both estimates when priced).
9. `grammar`: any other answer under a grammar, or with logprobs -> constrained_mode, unless a
   forced verified/ar says otherwise; a forced block goes there too: block follows a grammar only
   through a skeleton, and its tokens are not drawn from the AR distribution logprobs describe.

A new rule is a function here, placed in `RULES` where it applies, with a test of its own
(tests/router/test_rules.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from engines.types import MODES
from router.decision.errors import BadRouteError, ModelNotFoundError, RouteForbiddenError
from router.decision.features import PromptSize
from router.decision.layouts import engine_of
from router.decision.engine_view import EngineView
from router.decision.pricing import Pricing
from router.decision.types import Prediction, RouteRequest

if TYPE_CHECKING:
    from policies.schema import KeyOverride, Policy

FORCED_RULES = {"model": "forced_model", "header": "forced_header", "api_key": "api_key"}  # forced_by -> Decision.rule
FIRST_CHOICE = ("task_default", "long_output")  # the policy's own choice for the task, before any rule second-guesses it


@dataclasses.dataclass(frozen=True)
class Move:
    """What a rule does to the route."""

    mode: str  # block, verified or ar
    rule: str  # the Decision.rule label (forced_model, task_default, load, constrained, ...)
    reason: str  # the whole reason so far: a rule appends to the reason before it, or replaces it
    moved: bool = False  # load moved the request off its first choice (Decision.load_aware)


@dataclasses.dataclass(frozen=True)
class RouteContext:
    """What the rules read: the request, the policy snapshot that decides it, the prediction, and
    the route so far (mode, rule, reason, trace), which `apply` updates after each rule that moves it."""

    req: RouteRequest
    policy: Policy  # the snapshot read once per decision: every rule sees the same version
    pred: Prediction
    tokens: int  # the predicted p90 answer length, capped by max_tokens
    prompt: PromptSize = PromptSize(0, 0)  # approximate prompt and cacheable-head tokens
    override: KeyOverride | None = None  # the caller's API key override, if the policy has one
    forced: str | None = None  # the forced mode (`forcing`), if any
    forced_by: str | None = None  # model, header or api_key
    view: Mapping[str, EngineView] | None = None  # what routing knows of each engine now (load_aware rules)
    prices: Pricing | None = None  # the prices of this decision (router.decision.pricing), for cost_aware and skeleton; None: off
    mode: str | None = None  # the route so far
    rule: str = ""
    reason: str = ""
    moved: bool = False
    trace: tuple[str, ...] = ()  # `name:mode` of every rule that moved the route, in order

    @property
    def task(self) -> str:
        return self.pred.task

    @property
    def agrees(self) -> bool:
        """Whether block's answer is expected to be AR's: always, unless the model has an agreement
        head (trained on logged shadow verification) under the policy's agreement_floor."""
        return block_agrees(self.pred.agreement, self.policy)

    def queue_ratio(self, mode: str) -> float:
        engine = engine_of(self.view, mode) if self.view else None
        return self.view[engine].queue_ratio if engine in (self.view or {}) else 0.0


def block_agrees(agreement: float | None, policy: Policy) -> bool:
    return agreement is None or agreement >= policy.agreement_floor


def forced(ctx: RouteContext) -> Move | None:
    if ctx.forced is None:
        return None
    why = {"model": f"model {ctx.req.model!r} forces {ctx.forced}", "header": f"header {ctx.policy.forcing.header} forces {ctx.forced}",
           "api_key": f"API key override forces {ctx.forced}"}[ctx.forced_by]
    return Move(ctx.forced, FORCED_RULES[ctx.forced_by], why)


def task_default(ctx: RouteContext) -> Move | None:
    if ctx.forced is not None:
        return None
    keyed = ctx.override.task_modes if ctx.override else None
    mode = ctx.policy.task_mode(ctx.task, keyed)
    src = "key task_modes" if keyed and ctx.task in keyed else "task_modes"
    return Move(mode, "task_default", f"task {ctx.task} -> {mode} ({src})")


def long_output(ctx: RouteContext) -> Move | None:
    p = ctx.policy
    if ctx.forced is not None or not p.too_long_for(ctx.mode, ctx.tokens):
        return None
    return Move(p.long_mode, "long_output",
                f"task {ctx.task} defaults to block but p90 {ctx.tokens} tokens > block limit {p.block_limit_tokens}; {p.long_mode}")


def low_confidence(ctx: RouteContext) -> Move | None:
    if ctx.forced is not None or ctx.mode != "block":
        return None
    o, conf = ctx.override, ctx.pred.confidence
    floor = o.confidence_floor if o and o.confidence_floor is not None else ctx.policy.confidence_floor
    if conf >= floor:
        return None
    safe = ctx.policy.safe_mode
    return Move(safe, "low_confidence", f"task {ctx.task} at confidence {conf:.2f} < floor {floor:.2f}; safe mode {safe}")


def disagreement(ctx: RouteContext) -> Move | None:
    # it reviews the policy's first choice only: a safe mode low_confidence chose is not second-guessed
    if ctx.forced is not None or ctx.rule not in FIRST_CHOICE or ctx.agrees:
        return None
    expected = f"(agreement {ctx.pred.agreement:.2f} < {ctx.policy.agreement_floor:.2f})"
    if ctx.mode == "block":
        safe = ctx.policy.safe_mode
        return Move(safe, "disagreement", f"{ctx.reason}; block expected to answer worse than AR {expected}; safe mode {safe}")
    if ctx.mode == "verified":
        # verified's drafts are block's denoiser: where block is expected to write something else
        # than AR, its drafts are rejected and it writes AR's answer by AR steps, slower
        return Move("ar", "disagreement", f"{ctx.reason}; its drafts expected to miss AR's answer {expected}; ar")
    return None


def load_spill(ctx: RouteContext) -> Move | None:
    la = ctx.policy.load_aware
    if ctx.forced is not None or not (la.enabled and ctx.view) or ctx.queue_ratio(ctx.mode) <= la.max_queue_ratio:
        return None
    for alt in la.spill_order:
        if alt != ctx.mode and ctx.queue_ratio(alt) <= la.max_queue_ratio:
            why = f"{ctx.reason}; {ctx.mode} queue at {ctx.queue_ratio(ctx.mode):.2f} > {la.max_queue_ratio:.2f}, spilled to {alt}"
            return Move(alt, "load", why, moved=True)
    return None


def priceable(ctx: RouteContext) -> bool:
    """Whether routing can price modes for this request: load_aware and its cost_aware on, a view
    of the engines, and prices by the checkpoint's cost profile."""
    la = ctx.policy.load_aware
    return bool(la.enabled and la.cost_aware and ctx.view) and ctx.prices is not None and ctx.prices.cost is not None


def cost_aware(ctx: RouteContext) -> Move | None:
    if ctx.forced is not None or not priceable(ctx):
        return None
    faster = ctx.prices.faster_at_equal_quality(ctx.mode, ctx.tokens, ctx.policy, ctx.task, ctx.view, ctx.prompt, ctx.agrees)
    if faster is None:
        return None
    alt, gain, here, there = faster
    return Move(alt, "load", f"{ctx.reason}; est. {here:.0f} ms in {ctx.mode} vs {there:.0f} ms in {alt} ({gain:.1f}x), moved to {alt}",
                moved=True)


def seedable(req: RouteRequest) -> bool:
    """Every mode can serve an answer with a fixed skeleton, block by seeding its canvas with it
    (logprobs aside: block's tokens are not drawn from the AR distribution)."""
    return bool(req.structured and req.skeleton and not req.logprobs)


def skeleton(ctx: RouteContext) -> Move | None:
    # Block is the skeleton's mode only while it is the better of two valid answers: both modes follow
    # the schema (block through the seeded skeleton, constrained_mode under the grammar), so what
    # decides is whether block answers as AR does and whether it finishes sooner now. No min_gain
    # here, unlike cost_aware: neither mode is the safer first choice, the sooner one wins outright
    # (a burst of 96 schemas at concurrency 16 took 2.48 s p50 queued behind block's canvases, 0.51 s in AR).
    p, req = ctx.policy, ctx.req
    mode, other = p.skeleton_mode, p.constrained_mode
    if not seedable(req) or ctx.forced is not None:
        return None
    why = f"{ctx.reason}; the answer has a fixed skeleton ({req.structured})"
    if mode != "block":
        return Move(mode, "skeleton", f"{why}: skeleton_mode {mode}")
    if not ctx.agrees:
        return Move(other, "skeleton", f"{why}, but block is expected to answer worse than AR (agreement {ctx.pred.agreement:.2f} < "
                                       f"{p.agreement_floor:.2f}): constrained_mode {other}")
    if priceable(ctx):
        here, there = (ctx.prices.priced_ms(ctx.prices.at_policy(m, ctx.tokens, p, ctx.task, ctx.prompt), ctx.view) for m in (mode, other))
        if here is not None and there is not None:
            est = f"est. {here:.0f} ms in block vs {there:.0f} ms in {other}"
            if here > there:
                return Move(other, "skeleton", f"{why}; {est} at the current load: constrained_mode {other}", moved=True)
            return Move(mode, "skeleton", f"{why}; {est}: skeleton_mode {mode}")
    return Move(mode, "skeleton", f"{why}: skeleton_mode {mode}")


def grammar(ctx: RouteContext) -> Move | None:
    req, mode = ctx.req, ctx.policy.constrained_mode
    if seedable(req) or not (req.structured or req.logprobs) or ctx.mode == mode or (ctx.forced is not None and ctx.mode != "block"):
        return None
    need = f"the answer follows a grammar ({req.structured})" if req.structured else "logprobs need the AR distribution"
    return Move(mode, "constrained", f"{ctx.reason}; {need}: constrained_mode {mode}")


Rule = Callable[[RouteContext], "Move | None"]
RULES: tuple[Rule, ...] = (forced, task_default, long_output, low_confidence, disagreement, load_spill, cost_aware, skeleton, grammar)


def apply(ctx: RouteContext, rules: tuple[Rule, ...] = RULES) -> RouteContext:
    """`ctx` after every rule in order, each seeing the route the rules before it left."""
    for rule in rules:
        move = rule(ctx)
        if move is not None:
            ctx = dataclasses.replace(ctx, mode=move.mode, rule=move.rule, reason=move.reason, moved=ctx.moved or move.moved,
                                      trace=(*ctx.trace, f"{rule.__name__}:{move.mode}"))
    return ctx


def forcing(req: RouteRequest, policy: Policy, override: KeyOverride | None) -> tuple[str | None, str | None]:
    """(forced mode, what forced it: model, header or api_key), or (None, None). Raises a
    RouterError for a model the policy does not serve (404 model_not_found), a bad or conflicting
    mode header (400), or forcing the policy does not allow (403)."""
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
        raise BadRouteError(f"model {req.model!r} forces {model_mode} but header {rules.header} asks for {header_mode}", param=rules.header,
                            code="conflicting_mode")
    key_allows = override.allow_forcing if override is not None else None
    if model_mode:
        if not (rules.allow_model_alias if key_allows is None else key_allows):
            raise RouteForbiddenError(f"this policy does not let model {req.model!r} force a mode; use an auto alias", param="model",
                                      code="mode_forcing_disabled")
        if model_mode not in rules.allowed_modes:
            raise RouteForbiddenError(f"forcing {model_mode} is not allowed; allowed: {', '.join(rules.allowed_modes)}", param="model",
                                      code="mode_not_allowed")
        return model_mode, "model"
    if header_mode:
        if not (rules.allow_header if key_allows is None else key_allows):
            raise RouteForbiddenError(f"this policy does not accept the {rules.header} header", param=rules.header, code="mode_header_disabled")
        if header_mode not in rules.allowed_modes:
            raise RouteForbiddenError(f"forcing {header_mode} is not allowed; allowed: {', '.join(rules.allowed_modes)}", param=rules.header,
                                      code="mode_not_allowed")
        return header_mode, "header"
    return None, None
