"""Helpers every part of the suite shares: waiting on observable state, and a clock a test moves.

- `wait_until(read, ok)`: polls `read()` until `ok` holds for what it returned, and returns that
  value; past the deadline the test fails with the last value read. The deadline is a guard far
  beyond what the wait needs, not a measurement: nothing is timed by it.
- `ManualClock`: a monotonic clock (seconds) that stands still until the test advances it, for a
  component that takes its clock as an argument (router.decision.routing_view.RoutingView's
  `clock`): time passes in the test by assignment, never by patching the `time` module or sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(read: Callable[[], T], ok: Callable[[T], object] = bool, timeout_s: float = 5.0, interval_s: float = 0.02,
               what: str = "") -> T:
    """The first value of `read()` for which `ok(value)` holds (by default: the first truthy one).
    Fails the test (AssertionError) after `timeout_s` without it, naming `what` and the last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what or getattr(read, '__name__', 'the condition')}; last read {value!r}")
        time.sleep(interval_s)


class ManualClock:
    """A clock that reads `now` (seconds) until `advance` moves it, and moves by `tick` after each
    read (0: it stands still): pass it where a component takes `clock: Callable[[], float]`. With a
    tick, whatever the component times between two reads took `tick` seconds, however long it ran."""

    def __init__(self, now: float = 0.0, tick: float = 0.0):
        self.now, self.tick = now, tick
        self._lock = threading.Lock()  # a component may read it from its worker threads

    def __call__(self) -> float:
        with self._lock:
            now, self.now = self.now, self.now + self.tick
        return now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, f"a monotonic clock does not go back ({seconds} s)"
        self.now += seconds
