"""How the soak under faults reads its requests (tandem.bench.chaos): only a request that met the fault
is timed against it; a later one counts for the deadline, failures and the slowest-later column."""

from __future__ import annotations

from tandem.bench.chaos import DETECTION_S, _row
from tandem.bench.load import Outcome

AT = 100.0  # the fault's time (perf_counter seconds)


def outcome(started: float, latency: float, status: int = 200) -> Outcome:
    return Outcome(status=status, latency_s=latency, mode="ar", finished=started + latency)


def test_a_request_in_flight_at_the_kill_is_timed_from_the_kill():
    row = _row("kill ar engine", [outcome(AT - 2.0, 5.0), outcome(AT + 0.5, 1.0)], AT, 3.0, 8.0, DETECTION_S)
    assert row["max_wait_past_fault_s"] == 3.0
    assert row["worst"]["started_s"] == -2.0
    assert row["slowest_later_s"] is None


def test_a_request_started_after_the_detection_window_is_not_timed_against_the_kill():
    late = outcome(AT + DETECTION_S + 0.1, 4.6)
    row = _row("kill ar engine", [outcome(AT + 0.2, 1.5), late], AT, 14.0, 8.0, DETECTION_S)
    assert row["max_wait_past_fault_s"] == 1.5
    assert row["slowest_later_s"] == 4.6
    assert row["requests"] == 2


def test_without_an_exposure_window_every_request_is_timed_against_the_fault():
    row = _row("stop redis 3 s", [outcome(AT + 10.0, 4.6)], AT, 6.0, 8.0)
    assert row["max_wait_past_fault_s"] == 4.6
    assert row["slowest_later_s"] is None


def test_a_late_request_that_hangs_still_counts():
    row = _row("kill ar engine", [outcome(AT + 5.0, 20.0, status=0)], AT, 14.0, 8.0, DETECTION_S)
    assert row["hung"] == 1 and row["lost"] == 1 and row["max_wait_past_fault_s"] is None
