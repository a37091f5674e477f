"""Which engines are down right now, as one gateway sees them: `EngineHealth`.

Ray Serve hides a dead replica well and slowly: a request that reaches a killed replica fails at
once (an actor-death error), but every request sent after it waits in the handle's queue until
Serve has started a replacement (10-20 s here), and then in the gateway's request timeout. So the
gateway keeps its own view, fed by two signals:

- **death**: any call to the engine failed with one of Ray's actor-death errors
  (`replica_died(exc)`), or a probe failed and Ray's registry no longer holds any of the
  engine's replicas that answered a probe before (`replicas_alive`: a replica killed while idle
  gives no call a death error, and Serve's handle queues the probes sent after it); the poller
  probes that engine at once instead of at its next tick;
- **probes**: the routing view's load poll, every `interval_s` with a `timeout_s` bound. The
  engine answers it on its replica's event loop, which no request's work blocks (the scheduler
  prepares requests in threads and decodes in its own), so a live replica answers it whatever
  its load.

An engine is **down** only when it is dead: its probe fails within `death_window_s` of a death
(the replica that died has no replacement yet). A probe that fails or answers late without a
death is a busy or slow engine, never a dead one: it is counted (`failed_probes` in /admin/stats)
and nothing else; a replica that hangs without dying is Ray Serve's to restart (its health
check), and that restart is a death. A probe that answers brings an engine back. While an engine
is down the gateway sends nothing there: requests go to the policy's `on_engine_failure` mode or
get a 503 with Retry-After, and the requests still waiting on it are failed over at once
(`went_down`): with a second healthy replica the probe answers, the engine is not down, and
Serve's own retry moves them there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

DEATH_WINDOW_S = 5.0  # a failed probe this soon after an actor-death error: down at once
RETRY_AFTER_S = 5.0  # what a 503 for a down engine tells the client (a replica restarts in ~10-20 s here)


SERVE_NAMESPACE = "serve"  # where Ray Serve names its replica actors
KNOWN_REPLICAS = 8  # replica names remembered per engine (the most recent that answered a probe)


def replica_died(exc: BaseException) -> bool:
    """True for Ray's errors that mean the replica's process is gone or unreachable."""
    try:
        from ray.exceptions import ActorUnavailableError, RayActorError
        from ray.serve.exceptions import DeploymentUnavailableError
    except ImportError:  # pragma: no cover - Ray is a dependency
        return False
    cause = getattr(exc, "cause", None)  # a RayTaskError wrapping the death
    return isinstance(exc, (RayActorError, ActorUnavailableError, DeploymentUnavailableError)) or isinstance(cause, RayActorError)


def replicas_alive(names: Iterable[str]) -> dict[str, bool] | None:
    """Whether Ray still holds each named replica actor (a killed replica's name is gone from its
    registry at once: Serve's replicas are never restarted in place), or None when Ray cannot say.
    Blocking (a call to Ray's control store): run it in a thread."""
    try:
        import ray
    except ImportError:  # pragma: no cover - Ray is a dependency
        return None
    alive = {}
    for name in names:
        try:
            ray.get_actor(name, namespace=SERVE_NAMESPACE)
            alive[name] = True
        except ValueError:  # no such actor: it died
            alive[name] = False
        except Exception:
            return None
    return alive


class EngineHealth:
    def __init__(self, engines: Iterable[str], death_window_s: float = DEATH_WINDOW_S):
        self.death_window_s = death_window_s
        self._down_since: dict[str, float | None] = {e: None for e in engines}
        self._died_at: dict[str, float] = {}
        self._failures: dict[str, int] = {e: 0 for e in self._down_since}
        self._went_down: dict[str, asyncio.Future] = {}
        self.wake = asyncio.Event()  # set by a death: the poller probes now
        self.downs: dict[str, int] = {e: 0 for e in self._down_since}  # times each engine went down, for /admin/stats
        self.replicas: dict[str, list[str]] = {e: [] for e in self._down_since}  # replica actors that answered its probes, newest last

    def is_down(self, engine: str) -> bool:
        return self._down_since.get(engine) is not None

    def went_down(self, engine: str) -> asyncio.Future:
        """A future that completes when `engine` goes down (now, if it is)."""
        future = self._went_down.get(engine)
        if future is None or (future.done() and not self.is_down(engine)):
            future = self._went_down[engine] = asyncio.get_running_loop().create_future()
        if self.is_down(engine) and not future.done():
            future.set_result(None)
        return future

    def answered_by(self, engine: str, replica: str | None) -> None:
        """A probe of `engine` was answered by the replica actor named `replica`."""
        if replica:
            known = [r for r in self.replicas[engine] if r != replica] + [replica]
            self.replicas[engine] = known[-KNOWN_REPLICAS:]

    def gone(self, engine: str, alive: dict[str, bool] | None) -> bool:
        """Ray's answer on the replicas `engine` was answered by: forget the dead ones; True when it
        had some and every one is dead (a death, as an actor-death error would be)."""
        if not alive:
            return False
        self.replicas[engine] = [r for r in self.replicas[engine] if alive.get(r, True)]
        return not self.replicas[engine]

    async def replicas_gone(self, engine: str, timeout_s: float) -> bool:
        """Whether every replica of `engine` that answered a probe before is gone from Ray (`gone`);
        False when none answered before, or Ray cannot say within `timeout_s`."""
        known = list(self.replicas[engine])
        if not known:
            return False
        try:
            alive = await asyncio.wait_for(asyncio.to_thread(replicas_alive, known), timeout=timeout_s)
        except Exception:
            return False
        return self.gone(engine, alive)

    def died(self, engine: str) -> None:
        """An actor-death error from a call to `engine`: probe it now (unless it is down already: a
        gone deployment fails every probe at once, and waking on each would poll it in a busy loop)."""
        self._died_at[engine] = time.monotonic()
        if not self.is_down(engine):
            self.wake.set()

    def probed(self, engine: str, ok: bool) -> None:
        """The outcome of one probe of `engine`: down only if it failed soon after a death."""
        now = time.monotonic()
        if ok:
            self._failures[engine] = 0
            self._down_since[engine] = None
            self._died_at.pop(engine, None)
            return
        self._failures[engine] += 1
        recent_death = now - self._died_at.get(engine, -1e9) <= self.death_window_s
        if self.is_down(engine) or not recent_death:  # without a death a failed probe is a busy engine, not a dead one
            return
        self._down_since[engine] = now
        self.downs[engine] += 1
        future = self._went_down.get(engine)
        if future is not None and not future.done():
            future.set_result(None)

    def snapshot(self) -> dict:
        now = time.monotonic()
        return {e: {"down": since is not None, "down_for_s": round(now - since, 2) if since is not None else None,
                    "failed_probes": self._failures[e], "times_down": self.downs[e]} for e, since in self._down_since.items()}
