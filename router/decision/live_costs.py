"""What the gateway learns from the requests that come back, for the routing view
(`router.decision.routing_view`) to price the next ones with:

- `Backlog`: the block engine's work ahead, as a virtual FIFO clock (and, batched, the AR work
  ahead of a shared replica: the longest AR request's end);
- `Calibration`: how much longer than the cost profile's estimate an engine's own time really is,
  kept per `LoadState` (idle, busy, the other engine busy);
- `DraftShare`: the share of verified's tokens its drafts really wrote, per `DraftKey` (task, and
  whether the agreement head expected block to answer as AR);
- `Overhead`: a request's time outside the engine (added to estimates, not scaled).
"""

from __future__ import annotations

from typing import NamedTuple


class LoadState(NamedTuple):
    """What else an engine is doing when a request is sent to it: other requests of its own (a
    batch or a queue) and work on the other engine (on a CPU both share its cores)."""

    busy: bool  # the engine has requests in flight
    others_busy: bool  # another engine has

    @property
    def label(self) -> str:
        return {(False, False): "idle", (True, False): "busy", (False, True): "others busy", (True, True): "all busy"}[self]


IDLE = LoadState(False, False)


class DraftKey(NamedTuple):
    """What verified's draft share is kept apart by: the task type, and whether the router's agreement
    head expected block (verified's drafter) to answer as AR does. The suite's extractions and a
    hand-written extraction are one task, but only the first are drafted well."""

    task: str
    agrees: bool = True

    @property
    def label(self) -> str:
        return self.task if self.agrees else f"{self.task} (block expected to differ)"


class Backlog:
    """The work an engine has ahead, in estimated milliseconds, as a virtual FIFO clock: each
    dispatched request pushes the clock's end out by its estimate; each finished one moves it by
    how much sooner or later than expected it finished, so estimate errors do not pile up; an
    engine with nothing in flight has no backlog. Kept by the gateway for the requests it sent.
    `batched`: the requests share steps (AR rows join the running batch at the next token), so a
    new one ends its own estimate from now, not after the others: the clock is the longest one's end."""

    def __init__(self, batched: bool = False) -> None:
        self._end = 0.0  # time.monotonic() at which the work in flight is expected to be done
        self._in_flight = 0
        self.batched = batched

    def ahead_ms(self, now: float) -> float:
        return max(0.0, self._end - now) * 1000.0

    def add(self, estimate_ms: float, now: float) -> float:
        """Count a dispatched request; returns its expected finish time (pass it to `done`)."""
        self._end = max(self._end, now + estimate_ms / 1000.0) if self.batched else max(self._end, now) + estimate_ms / 1000.0
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
        self.count = 0  # requests observed

    @property
    def factor(self) -> float:
        if self._estimated <= 0:
            return 1.0
        return min(self.high, max(self.low, self._observed / self._estimated))

    def observe(self, observed_ms: float, estimated_ms: float) -> None:
        if estimated_ms <= 0:
            return
        self.count += 1
        self._observed += self.alpha * (observed_ms - self._observed)
        self._estimated += self.alpha * (estimated_ms - self._estimated)


class DraftShare(Calibration):
    """The share of verified's output tokens that its drafts wrote (accepted draft tokens over all
    tokens written), for one task type: the same weighted sums as `Calibration` (long answers weigh
    by their length, old evidence decays), in [0, 1]. The task suite's acceptance prices verified
    until there is evidence; prompts of a task unlike the suite's can draft far less (AR unsure,
    drafts rejected). `observe(drafted, written)`."""

    def __init__(self, alpha: float = 0.2) -> None:
        super().__init__(alpha, low=0.0, high=1.0)

    @property
    def share(self) -> float:
        return self.factor if self.count else 0.0


class Overhead:
    """A request's milliseconds outside the engine's queue and decode (the handle's hop, the chat
    template and tokenizer, the answer's way back): an exponentially weighted mean."""

    def __init__(self, alpha: float = 0.2) -> None:
        self.alpha = alpha
        self.ms = 0.0
        self.count = 0

    def observe(self, ms: float) -> None:
        self.ms = max(0.0, ms) if self.count == 0 else self.ms + self.alpha * (max(0.0, ms) - self.ms)
        self.count += 1
