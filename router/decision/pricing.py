"""What a mode would cost one request: milliseconds until it finishes, by the engines' cost profile
(`engines.cost.CostProfile`) and what routing knows of each engine now (`EngineView`).

A `Pricing` is the cost profile one decision was priced with. `Router.decide` puts it on the
`Decision` with the policy that made it, so what happens to the request later (its dispatch
estimate, failover's "can the other mode finish in time") prices with the same profile the route
was chosen by, and the gateway's failover needs nothing from the router.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines.defaults import MIN_PREFIX_TOKENS
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
        known (or by `draft_share` when given: what one finished request's drafts wrote)."""
        e = view.get(engine_of(view, mode)) if view else None
        if self.cost is None or e is None or not e.reachable:
            return None
        prompt = prompt or PromptSize(0, 0)
        cached = expected_cached_tokens(prompt, e)
        share = draft_share if draft_share is not None else e.draft_share.get(DraftKey(task, agrees)) if task else None
        return self.cost.finish_ms(mode, max(1, tokens), steps, canvas or self.cost.canvas, e.queued, e.running, max(1, e.capacity),
                                   task, backlog_ms=e.backlog_ms, prompt_tokens=prompt.tokens, cached_tokens=cached,
                                   draft_share=share)

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


def expected_cached_tokens(prompt: PromptSize, engine: EngineView) -> float:
    """Prompt tokens an engine's prefix cache is expected to hold: the head (all but the last
    message) times the share of prefix tokens it has reused so far; heads under MIN_PREFIX_TOKENS
    are never cached."""
    return prompt.head_tokens * engine.prefix_reuse if prompt.head_tokens >= MIN_PREFIX_TOKENS else 0.0
