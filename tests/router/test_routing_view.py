"""The routing view's poll loop (router/decision/routing_view.py): what it learns from the engines at
start is asked again until they answer, so a gateway that starts beside busy engines does not run
without cost-aware routing or prompt limits for its whole life."""

from __future__ import annotations

import asyncio

import pytest

from engines.cost import CostProfile
from engines.types import EngineInfo, EngineLoad
from router.decision.routing_view import RoutingView


class Call:
    """One EngineClient method (router.decision.engine_client), answering after `delays` seconds in
    turn (the last delay repeats)."""

    def __init__(self, answer, delays: list[float]):
        self.answer, self.delays, self.calls = answer, delays, 0

    async def __call__(self):
        delay = self.delays[min(self.calls, len(self.delays) - 1)]
        self.calls += 1
        await asyncio.sleep(delay)
        return self.answer


class Engine:
    def __init__(self, cost_delays: list[float]):
        self.cost_profile = Call(CostProfile(ms_per_forward={"ar": {1: 1.0}, "block": {1: 2.0}}), cost_delays)
        self.info = Call(EngineInfo(checkpoint="tiny", modes=["block", "verified"], canvas_length=64, context_length=512,
                                    max_chars_per_token=16), [0.0])
        self.load = Call(EngineLoad(queued=0, running=0, capacity=4, max_queue=8), [0.0])


@pytest.mark.slow
def test_a_cost_profile_that_did_not_answer_at_start_is_asked_for_again():
    async def run():
        block = Engine(cost_delays=[1.0, 0.0])  # the first answer comes after the view stopped waiting
        view = RoutingView({"block": block, "ar": Engine([0.0])}, poll_interval_s=0.01, facts_timeout_s=0.1)
        view.start()
        await view.ready()
        for _ in range(500):
            if view.cost is not None:
                break
            await asyncio.sleep(0.01)
        view._poller.cancel()
        return view, block

    view, block = asyncio.run(run())
    assert block.cost_profile.calls >= 2, "asked again after the first call timed out"
    assert view.cost is not None, "the view holds the profile (the router reads it there) once it answered"
    assert view.canvas_limit == 64 and view.prompt_limit is not None
