"""What a mode would cost one request: milliseconds until it finishes, by the engines' cost profile
(`engines.cost.CostProfile`) and what routing knows of each engine now (`EngineView`).

A `Pricing` is the cost profile one decision was priced with. `Router.decide` puts it on the
`Decision` with the policy that made it, so what happens to the request later (its dispatch
estimate, failover's "can the other mode finish in time") prices with the same profile the route
was chosen by, and the gateway's failover needs nothing from the router.

On a shared replica (one engine serving every mode, the shared layout) a mode does not escape the
others' work by moving: the replica's scheduler interleaves two lanes at one decode thread
(engines.types.LANE_OF_MODE: canvases for block; tokens for verified and AR, whose rows share one
batch and its steps), so a mode is priced by its own lane's work there plus the turns the other
lane's steps take (`turns_ms`; none where each lane has a thread of its own). Moving a request
from block to AR there does not leave the canvases behind, nor from verified to AR verified's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines.defaults import MIN_PREFIX_TOKENS
from engines.types import LANE_OF_MODE
from router.decision.engine_view import EngineView
from router.decision.features import PromptSize
from router.decision.layouts import engine_of
from router.decision.live_costs import DraftKey

if TYPE_CHECKING:
    from engines.cost import CostProfile


@dataclass(frozen=True)
class Pricing:
    """Estimates by one cost profile (`cost`; None: no profile, so no estimates)."""

    cost: CostProfile | None = None

    def finish_estimate(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None,
                        view: Mapping[str, EngineView] | None, prompt: PromptSize | None = None,
                        draft_share: float | None = None, agrees: bool = True) -> float | None:
        """Milliseconds until a request would finish in `mode` given the view, by the cost profile
        alone (None without a profile or a reachable engine); callers apply the engine's calibration
        (`EngineView.priced`). The prompt's prefill is priced less what the engine's prefix cache is
        expected to hold: its head (all but the last message) times the share of prefix tokens that
        engine has reused. Verified is priced by the share of its tokens drafts wrote lately for the
        task and the agreement head's expectation (`agrees`: block expected to answer as AR), once
        known (or by `draft_share` when given: what one finished request's drafts wrote). On a
        shared replica (`EngineView.by_mode`), the queue it waits in is its own lane's: block behind
        the canvas backlog; verified and AR as rows of one batch (batch-mates, at the batch's
        capacity); and the other lane's turns are added (`turns_ms`)."""
        e = view.get(engine_of(view, mode)) if view else None
        if self.cost is None or e is None or not e.reachable:
            return None
        prompt = prompt or PromptSize(0, 0)
        cached = expected_cached_tokens(prompt, e)
        share = draft_share if draft_share is not None else e.draft_share.get(DraftKey(task, agrees)) if task else None
        queued, running, backlog = e.queued, e.running, e.backlog_ms
        if e.by_mode:  # a shared replica: only its own lane's requests batch with it or are ahead of it
            mine = sum(n for m, n in e.by_mode.items() if LANE_OF_MODE[m] == LANE_OF_MODE[mode])
            running = min(mine, max(1, e.capacity))
            queued = mine - running
            backlog = e.backlog_ms if LANE_OF_MODE[mode] == "canvas" else None  # the canvas backlog holds block's work only
        own = self.cost.finish_ms(mode, max(1, tokens), steps, canvas or self.cost.canvas, queued, running, max(1, e.capacity),
                                  task, backlog_ms=backlog, prompt_tokens=prompt.tokens, cached_tokens=cached,
                                  draft_share=share)
        return own + turns_ms(mode, own, e)

    def service_ms(self, mode: str, tokens: int, steps: int, canvas: int | None, task: str | None, prompt: PromptSize,
                   engine: EngineView | None, key: DraftKey) -> float | None:
        """Milliseconds `engine` would spend on the request alone (batch 1, no queue): what it adds to
        the block engine's backlog. Its prefill less what the prefix cache is expected to hold; verified
        at the draft share the engine has seen under `key`. None without a profile."""
        if self.cost is None:
            return None
        cached = expected_cached_tokens(prompt, engine) if engine is not None else 0.0
        share = engine.draft_share.get(key) if engine is not None and task else None
        return self.cost.service_ms(mode, tokens, steps, canvas, task, prompt.tokens, cached, share)


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
