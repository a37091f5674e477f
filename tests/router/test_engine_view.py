"""One engine as routing sees it (router.decision.engine_view): an estimate made real by the engine's
calibration (a task's own where it has one) plus its overhead, and what a load poll's counters say."""

from __future__ import annotations

import pytest

from router.decision.engine_view import EngineView, prefix_reuse, step_ms


def test_an_estimate_is_scaled_by_the_tasks_own_factor_where_known_and_the_overhead_added_unscaled():
    view = EngineView(calibration=2.0, by_task={("ar", "extract"): 0.5}, overhead_ms=30.0)
    assert view.factor("ar", "extract") == 0.5
    assert view.factor("ar", "write") == view.factor("block", "extract") == view.factor("ar", None) == 2.0
    assert view.priced("ar", "extract", 100.0) == pytest.approx(80.0)
    assert view.priced("ar", None, 100.0) == pytest.approx(230.0)


def test_prefix_reuse_is_the_share_of_looked_up_tokens_the_cache_served():
    assert prefix_reuse({"prefix_cache": {"looked_up_tokens": 400, "reused_tokens": 100}}) == 0.25
    assert prefix_reuse({"prefix_cache": {"looked_up_tokens": 0, "reused_tokens": 0}}) == 0.0
    assert prefix_reuse({}) == prefix_reuse(None) == 0.0  # no cache on that engine


def test_step_time_is_per_mode_between_two_polls_and_only_for_modes_that_stepped():
    before = {"steps": {"ar": 10, "block": 4}, "decode_s": {"ar": 0.1, "block": 0.4}}
    now = {"steps": {"ar": 30, "block": 4, "verified": 2}, "decode_s": {"ar": 0.3, "block": 0.4, "verified": 0.05}}
    times = step_ms(before, now)
    assert times.keys() == {"ar", "verified"}  # block did not step in between
    assert times["ar"] == pytest.approx(10.0) and times["verified"] == pytest.approx(25.0)
    assert step_ms(None, now)["block"] == pytest.approx(100.0)  # the first poll: since the replica started
