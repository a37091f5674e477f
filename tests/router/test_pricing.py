"""Pricing (router/decision/pricing.py): what a mode would cost one request, by a real cost profile
(the tiny model's, measured on a CPU: tests/data/tiny_cost_profile.json) and what routing knows of
each engine (`EngineView`). Estimates grow with the queue and the answer's length, the prefix cache
and verified's drafts price in where they apply, and without a profile or an engine there is no
estimate rather than a made-up one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engines.cost import PROFILE_FILE, CostProfile
from router.decision.engine_view import EngineView
from router.decision.features import PromptSize
from router.decision.live_costs import DraftKey
from router.decision.pricing import PriceQuery, Pricing, expected_cached_tokens

PROFILE = Path(__file__).resolve().parents[1] / "data" / "tiny_cost_profile.json"
MODES = ("block", "verified", "ar")


@pytest.fixture(scope="module")
def cost(tmp_path_factory) -> CostProfile:
    directory = tmp_path_factory.mktemp("profile")
    shutil.copy(PROFILE, directory / PROFILE_FILE)
    return CostProfile.load(directory)


def estimate(pricing: Pricing, mode: str, engine: EngineView, tokens: int = 64, **kwargs) -> float | None:
    """`mode`'s finish estimate with `engine` serving both engines of the split layout."""
    return pricing.finish_estimate(PriceQuery(mode, tokens, 12, None, "extract", **kwargs), {"block": engine, "ar": engine})


def test_no_profile_or_no_reachable_engine_is_no_estimate(cost):
    idle = EngineView()
    assert all(estimate(Pricing(), m, idle) is None for m in MODES)
    assert all(estimate(Pricing(cost), m, EngineView(reachable=False)) is None for m in MODES)
    assert Pricing(cost).finish_estimate(PriceQuery("ar", 64, 12, None, "extract"), None) is None
    assert Pricing().service_ms(PriceQuery("ar", 64, 12, None, "extract", PromptSize(10, 0)), None) is None


@pytest.mark.parametrize("mode", MODES)
def test_an_estimate_grows_with_the_queue_ahead(mode, cost):
    pricing = Pricing(cost)
    by_queue = [estimate(pricing, mode, EngineView(queued=q, running=1, capacity=4)) for q in range(0, 13)]
    assert all(a <= b for a, b in zip(by_queue, by_queue[1:])), by_queue
    assert by_queue[-1] > by_queue[0] * 2  # three batches ahead of it cost more than two more rows in its own


@pytest.mark.parametrize("mode", MODES)
def test_an_estimate_grows_with_the_answer_and_an_idle_engine_costs_its_service_time(mode, cost):
    pricing, idle = Pricing(cost), EngineView()
    by_tokens = [estimate(pricing, mode, idle, tokens=t) for t in (1, 16, 64, 256)]
    assert all(a <= b for a, b in zip(by_tokens, by_tokens[1:])) and by_tokens[-1] > by_tokens[0], by_tokens
    alone = pricing.service_ms(PriceQuery(mode, 64, 12, cost.canvas, "extract", PromptSize(0, 0)), idle)
    assert estimate(pricing, mode, idle) == pytest.approx(alone)


def test_the_cheaper_mode_changes_with_the_load(cost):
    """On the tiny model's CPU, a 64-token answer finishes sooner in block on idle engines, and in AR
    once a dozen requests wait: AR rows share steps, canvases mostly wait their turn."""
    pricing = Pricing(cost)
    idle, busy = EngineView(capacity=4), EngineView(queued=12, running=1, capacity=4)
    assert estimate(pricing, "block", idle) < estimate(pricing, "ar", idle)
    assert estimate(pricing, "ar", busy) < estimate(pricing, "block", busy) < estimate(pricing, "verified", busy)


def test_a_block_backlog_is_waited_out_first(cost):
    pricing = Pricing(cost)
    free, behind = EngineView(backlog_ms=0.0), EngineView(backlog_ms=500.0)
    for mode in ("block", "verified"):
        assert estimate(pricing, mode, behind) == pytest.approx(estimate(pricing, mode, free) + 500.0)
    assert estimate(pricing, "ar", behind) == estimate(pricing, "ar", free)  # AR rows join the running batch


def test_the_prefix_cache_discounts_a_repeated_head_only(cost):
    pricing = Pricing(CostProfile(**{**cost.__dict__, "prefill_ms_per_token": {"block": 0.5, "ar": 0.5}}))
    cold, warm = EngineView(prefix_reuse=0.0), EngineView(prefix_reuse=0.75)
    agent_turn, short_head = PromptSize(tokens=400, head_tokens=300), PromptSize(tokens=400, head_tokens=40)
    assert expected_cached_tokens(agent_turn, warm) == 225 and expected_cached_tokens(short_head, warm) == 0
    for mode in MODES:
        saved = estimate(pricing, mode, cold, prompt=agent_turn) - estimate(pricing, mode, warm, prompt=agent_turn)
        assert saved == pytest.approx(225 * 0.5)  # the cached tokens' prefill, nothing else
        assert estimate(pricing, mode, warm, prompt=short_head) == estimate(pricing, mode, cold, prompt=short_head)


def test_verified_is_priced_by_the_share_its_drafts_wrote(cost):
    pricing = Pricing(cost)
    drafts_hit, drafts_miss = EngineView(draft_share={DraftKey("extract"): 1.0}), EngineView(draft_share={DraftKey("extract"): 0.0})
    hit, miss = estimate(pricing, "verified", drafts_hit, tokens=256), estimate(pricing, "verified", drafts_miss, tokens=256)
    assert miss == pytest.approx(256 * cost.forward_ms("ar", 1))  # drafts that miss: verified costs AR's steps
    assert hit == pytest.approx(estimate(pricing, "verified", EngineView(), tokens=256))  # drafts that write it all: the profile's rounds
    assert estimate(pricing, "verified", drafts_hit, tokens=256, draft_share=0.0) == pytest.approx(miss)  # a given share wins
    assert estimate(pricing, "verified", drafts_hit, tokens=256, agrees=False) == estimate(pricing, "verified", EngineView(), tokens=256)
