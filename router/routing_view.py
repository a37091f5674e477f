"""What routing knows of the engines, kept by the gateway.

`Backlog`: the work the block engine has ahead (estimated milliseconds); `Calibration`: how much
longer than the cost profile's estimate each engine really takes."""

from __future__ import annotations


class Backlog:
    """The work an engine has ahead, in estimated milliseconds, as a virtual FIFO clock: each
    dispatched request pushes the clock's end out by its estimate; each finished one moves it by
    how much sooner or later than expected it finished, so estimate errors do not pile up; an
    engine with nothing in flight has no backlog. Kept by the gateway for the requests it sent."""

    def __init__(self) -> None:
        self._end = 0.0  # time.monotonic() at which the work in flight is expected to be done
        self._in_flight = 0

    def ahead_ms(self, now: float) -> float:
        return max(0.0, self._end - now) * 1000.0

    def add(self, estimate_ms: float, now: float) -> float:
        """Count a dispatched request; returns its expected finish time (pass it to `done`)."""
        self._end = max(self._end, now) + estimate_ms / 1000.0
        self._in_flight += 1
        return self._end

    def done(self, expected: float, now: float) -> None:
        self._in_flight = max(0, self._in_flight - 1)
        self._end = max(now, self._end + (now - expected)) if self._in_flight else now


class Calibration:
    """How much longer than estimated an engine's requests really take: exponentially weighted
    sums of observed and of estimated time, and their ratio (clamped to [low, high]). Sums rather
    than a mean of ratios, so long requests weigh by their length and a 5 ms request's fixed
    call overhead does not scale a 500 ms estimate. The profile is measured on an idle machine,
    one engine at a time; serving adds the HTTP stack, admissions and other engines on the same
    cores. The router multiplies that engine's estimates by `factor`."""

    def __init__(self, alpha: float = 0.2, low: float = 0.5, high: float = 4.0) -> None:
        self.alpha, self.low, self.high = alpha, low, high
        self._observed = self._estimated = 0.0

    @property
    def factor(self) -> float:
        if self._estimated <= 0:
            return 1.0
        return min(self.high, max(self.low, self._observed / self._estimated))

    def observe(self, observed_ms: float, estimated_ms: float) -> None:
        if estimated_ms <= 0:
            return
        self._observed += self.alpha * (observed_ms - self._observed)
        self._estimated += self.alpha * (estimated_ms - self._estimated)
