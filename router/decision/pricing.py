"""What a mode would cost one request: milliseconds until it finishes, by the engines' cost profile
(`engines.cost.CostProfile`) and what routing knows of each engine now (`EngineView`). The pricer.

A `Pricing` is the prices one decision was made by (the cost profile then). `Router.decide` hands
it to the rules (`RouteContext.prices`: `faster_at_equal_quality`, `priced_ms`) and puts it on the
`Decision` with the policy that made it, so what happens to the request later (its dispatch
estimate, failover's "can the other mode finish in time") prices with the same profile the route
was chosen by, and neither the rules nor the gateway's failover call back into the router. A price
is asked with a `PriceQuery`: what is priced (mode, length, steps, canvas, task, prompt) and by
which evidence (the agreement head's half of the draft key, or one request's own draft share).

On a shared replica (one engine serving every mode, the shared layout) a mode does not escape the
others' work by moving: the replica's scheduler interleaves two lanes at one decode thread
(engines.types.LANE_OF_MODE: canvases for block; tokens for verified and AR, whose rows share one
batch and its steps), so a mode is priced by its own lane's work there plus the turns the other
lane's steps take (`turns_ms`; none where each lane has a thread of its own). Moving a request
from block to AR there does not leave the canvases behind, nor from verified to AR verified's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engines.defaults import MIN_PREFIX_TOKENS
from engines.types import LANE_OF_MODE
from router.decision.engine_view import EngineView
from router.decision.features import PromptSize
from router.decision.layouts import engine_of
from router.decision.live_costs import DraftKey

if TYPE_CHECKING:
    from engines.cost import CostProfile
    from policies.schema import Policy


@dataclass(frozen=True)
class PriceQuery:
    """One request as priced: what it asks of a mode, and the evidence it is priced by."""

    mode: str  # block, verified or ar
    tokens: int  # answer length priced (the router's p90 under max_tokens, or what was written)
    steps: int  # denoising steps per canvas
    canvas: int | None = None  # canvas size (None: the profile's)
    task: str | None = None  # the router's task type
    prompt: PromptSize = PromptSize(0, 0)  # prompt and cacheable-head tokens
    agrees: bool = True  # the agreement head expects block to answer as AR (the DraftKey's half)
    draft_share: float | None = None  # the share of verified's tokens drafts wrote (None: the engine's recent one)

    def key(self) -> DraftKey | None:
        """What verified's draft share is kept under for it (None without a task)."""
        return DraftKey(self.task, self.agrees) if self.task else None


@dataclass(frozen=True)
class Pricing:
    """Estimates by one cost profile (`cost`; None: no profile, so no estimates)."""

    cost: CostProfile | None = None

    def finish_estimate(self, q: PriceQuery, view: Mapping[str, EngineView] | None) -> float | None:
        """Milliseconds until request `q` would finish in `q.mode` given the view, by the cost profile
        alone (None without a profile or a reachable engine); callers apply the engine's calibration
        (`EngineView.priced`). The prompt's prefill is priced less what the engine's prefix cache is
        expected to hold: its head (all but the last message) times the share of prefix tokens that
        engine has reused. Verified is priced by the share of its tokens drafts wrote lately for the
        task and the agreement head's expectation (`agrees`: block expected to answer as AR), once
        known (or by `draft_share` when given: what one finished request's drafts wrote). On a
        shared replica (`EngineView.by_mode`), the queue it waits in is its own lane's: block behind
        the canvas backlog; verified and AR as rows of one batch (batch-mates, at the batch's
        capacity); and the other lane's turns are added (`turns_ms`)."""
        mode, prompt = q.mode, q.prompt
        e = view.get(engine_of(view, mode)) if view else None
        if self.cost is None or e is None or not e.reachable:
            return None
        cached = expected_cached_tokens(prompt, e)
        share = q.draft_share if q.draft_share is not None else e.draft_share.get(q.key()) if q.task else None
        queued, running, backlog = e.queued, e.running, e.backlog_ms
        if e.by_mode:  # a shared replica: only its own lane's requests batch with it or are ahead of it
            mine = sum(n for m, n in e.by_mode.items() if LANE_OF_MODE[m] == LANE_OF_MODE[mode])
            running = min(mine, max(1, e.capacity))
            queued = mine - running
            backlog = e.backlog_ms if LANE_OF_MODE[mode] == "canvas" else None  # the canvas backlog holds block's work only
        own = self.cost.finish_ms(mode, max(1, q.tokens), q.steps, q.canvas or self.cost.canvas, queued, running, max(1, e.capacity),
                                  q.task, backlog_ms=backlog, prompt_tokens=prompt.tokens, cached_tokens=cached,
                                  draft_share=share)
        return own + turns_ms(mode, own, e)

    def service_ms(self, q: PriceQuery, engine: EngineView | None) -> float | None:
        """Milliseconds `engine` would spend on request `q` alone (batch 1, no queue): what it adds to
        the block engine's backlog. Its prefill less what the prefix cache is expected to hold; verified
        at the draft share the engine has seen under the query's draft key. None without a profile."""
        if self.cost is None:
            return None
        cached = expected_cached_tokens(q.prompt, engine) if engine is not None else 0.0
        share = engine.draft_share.get(q.key()) if engine is not None and q.task else None
        return self.cost.service_ms(q.mode, q.tokens, q.steps, q.canvas, q.task, q.prompt.tokens, cached, share)

    def priced_ms(self, q: PriceQuery, view: Mapping[str, EngineView]) -> float | None:
        """Milliseconds until request `q` would finish in its mode now, as routing prices it: the cost
        profile's estimate behind the view's queue (`finish_estimate`), made real by what that engine
        was observed to take (`EngineView.priced`). None without a profile or a reachable engine."""
        raw = self.finish_estimate(q, view)
        return None if raw is None else view[engine_of(view, q.mode)].priced(q.mode, q.task, raw)

    def at_policy(self, mode: str, tokens: int, policy: Policy, task: str, prompt: PromptSize, agrees: bool = True) -> PriceQuery:
        """The query for a request about to be routed: the policy's steps and canvas for its task and length."""
        return PriceQuery(mode, tokens, policy.steps_for(task), policy.canvas_for(tokens), task, prompt, agrees)

    def faster_at_equal_quality(self, mode: str, tokens: int, policy: Policy, task: str, view: Mapping[str, EngineView],
                                prompt: PromptSize, block_agrees: bool = True):
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
        query = self.at_policy(mode, tokens, policy, task, prompt, block_agrees)

        def known(m: str) -> bool:
            """The profile prices an idle engine well, a busy one only roughly (two engines share the
            cores, canvases and drafts take turns): under load a mode is a way out only once that
            engine has answered requests of it in its present load (the first burst at concurrency
            8 moved reasoning to block by estimates 2x too kind: 4 s each where AR took ~2 s)."""
            e = view.get(engine_of(view, m))
            return e is None or e.idle or m in e.seen

        here = self.priced_ms(query, view)
        options = [(there, m) for m in sorted(same - {mode})
                   if known(m) and (there := self.priced_ms(replace(query, mode=m), view)) is not None and there > 0]
        if here is None or not options:
            return None
        there, alt = min(options)
        gain = here / there
        return (alt, gain, here, there) if gain >= policy.load_aware.min_gain else None


def turns_ms(mode: str, own_ms: float, engine: EngineView) -> float:
    """Milliseconds a shared replica's decode thread spends on the other lane (canvases for a verified
    or AR request, tokens for a canvas one) while a `mode` request's own work (`own_ms`) is done
    there; 0 on an engine of one lane's modes (the split layout's AR engine; its block engine is
    priced as one serial server by its backlog). The scheduler's fairness rule (engines.replica.scheduler):
    every mode with work gets an equal share of decode time, a step at a time, and a step that served
    several modes' rows is charged to each in part. So a lane with k of the busy modes gets k of
    their shares: beside k modes of its own lane, each busy mode of the other lane takes `own_ms` / k
    plus one of its steps (measured there lately), together at most the other lane's work ahead: the
    canvas backlog for a tokens request, the tokens lane's for a canvas (unknown to this gateway,
    e.g. another gateway's requests: no bound). The modes of its own lane are already in its own
    estimate (verified and AR rows batch together; block behind the canvas backlog). A replica whose
    lanes decode on threads of their own takes no turns: 0 (what the two threads cost each other,
    a core's share or the GIL, is in the step times measured under the present mix)."""
    if engine.lanes_apart:
        return 0.0
    lane = LANE_OF_MODE[mode]
    busy = {m for m, n in engine.by_mode.items() if n} | {mode}
    others = [m for m in busy if LANE_OF_MODE[m] != lane]
    if not others:
        return 0.0
    mine = len(busy) - len(others)
    turns = sum(own_ms / mine + engine.step_ms.get(m, 0.0) for m in others)
    ahead = engine.backlog_ms if lane == "tokens" else engine.tokens_work_ms
    return min(turns, ahead) if ahead else turns


def expected_cached_tokens(prompt: PromptSize, engine: EngineView) -> float:
    """Prompt tokens an engine's prefix cache is expected to hold: the head (all but the last
    message) times the share of prefix tokens it has reused so far; heads under MIN_PREFIX_TOKENS
    are never cached."""
    return prompt.head_tokens * engine.prefix_reuse if prompt.head_tokens >= MIN_PREFIX_TOKENS else 0.0
