"""What the gateway learns from answered requests (router.decision.live_costs): the block backlog as a
FIFO clock, calibration and draft share as length-weighted ratios, the overhead as a weighted mean."""

from __future__ import annotations

import pytest

from router.decision.live_costs import IDLE, Backlog, Calibration, DraftKey, DraftShare, LoadState, Overhead


def test_the_block_backlog_is_a_fifo_clock_corrected_by_what_really_finished():
    b = Backlog()
    first = b.add(300.0, now=0.0)
    second = b.add(200.0, now=0.0)
    assert b.ahead_ms(0.0) == pytest.approx(500.0) and b.ahead_ms(0.1) == pytest.approx(400.0)
    b.done(first, now=0.1)  # finished 200 ms early: the one behind it moves up
    assert b.ahead_ms(0.1) == pytest.approx(200.0)
    b.done(second, now=0.5)  # nothing left in flight: no backlog, however late it ran
    assert b.ahead_ms(0.5) == 0.0 and b.ahead_ms(0.0) == pytest.approx(500.0)


def test_a_batched_backlog_ends_at_its_longest_request_not_their_sum():
    b = Backlog(batched=True)
    b.add(300.0, now=0.0)
    b.add(200.0, now=0.0)  # joins the running batch: done with the first, not after it
    assert b.ahead_ms(0.0) == pytest.approx(300.0)
    b.add(400.0, now=0.1)
    assert b.ahead_ms(0.1) == pytest.approx(400.0)


def test_calibration_is_clamped_and_ignores_requests_without_an_estimate():
    c = Calibration(alpha=1.0, low=0.5, high=4.0)
    c.observe(observed_ms=10.0, estimated_ms=0.0)
    assert (c.factor, c.count) == (1.0, 0)
    c.observe(observed_ms=1.0, estimated_ms=100.0)
    assert c.factor == 0.5  # far faster than the profile: held at its floor


def test_draft_share_is_zero_until_observed_and_stays_a_share():
    d = DraftShare(alpha=0.5)
    assert d.share == 0.0
    for _ in range(20):
        d.observe(30.0, 40.0)  # drafts wrote 30 of 40 tokens
    assert d.share == pytest.approx(0.75, rel=1e-3)
    d.observe(500.0, 40.0)  # a miscount cannot make it more than all
    assert d.share == 1.0


def test_overhead_starts_at_its_first_request_then_moves_toward_the_next():
    o = Overhead(alpha=0.5)
    o.observe(-3.0)  # a clock skew is no negative overhead
    assert (o.ms, o.count) == (0.0, 1)
    o.observe(10.0)
    assert o.ms == pytest.approx(5.0) and o.count == 2


def test_states_and_keys_read_as_their_labels():
    assert [s.label for s in (IDLE, LoadState(True, False), LoadState(False, True), LoadState(True, True))] == [
        "idle", "busy", "others busy", "all busy"]
    assert DraftKey("extract").label == "extract" and DraftKey("extract", agrees=False).label == "extract (block expected to differ)"
