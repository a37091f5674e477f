"""`EngineClient`: everything the router side asks an engine, as one typed interface (as Ray Serve
LLM's `LLMEngine`), and `HandleClient`, that interface over a Ray Serve `DeploymentHandle` to an
`engines.replica.deployment.EngineDeployment`.

The gateway (failover, shadow verification, /admin/stats) and the routing view (polls, the cost
profile and limits) hold `EngineClient`s only, so none of them spells a handle's `.remote` or
`.options(stream=True)`, and a test can hand them a small real engine in-process.

The contract:
- `generate(request)`: the whole answer, or the engine's refusal as a `TandemError` value (a full
  queue: 429, a mode this engine does not serve: 400). Other exceptions mean the engine failed
  (failover turns them into a 503). Cancelling the await cancels the engine's work.
- `stream(request)`: an `EngineStream` of text deltas, then the `GenerationResult` (or a
  `TandemError` in place of either); `cancel()` frees the engine's scheduler slot.
- `agreement(request, answer_ids)`: how many leading tokens of a finished block answer AR accepts
  (`answer_ids` may end on the stop token that ended it: `GenerationResult.checked_ids`).
- `load()`, `info()`, `cost_profile()`: occupancy (also the health probe), what the engine serves,
  and the checkpoint's measured cost profile (None when it ships none).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from engines.cost import CostProfile
    from engines.errors import TandemError
    from engines.types import EngineInfo, EngineLoad, GenerationRequest, GenerationResult


class EngineStream(Protocol):
    """A started stream: its items in order, and a way to stop the engine's work on it."""

    def __aiter__(self) -> AsyncIterator[str | GenerationResult | TandemError]: ...

    async def __anext__(self) -> str | GenerationResult | TandemError: ...

    def cancel(self) -> None: ...


class EngineClient(Protocol):
    """What the router side asks one engine deployment (the contract: the module docstring)."""

    async def generate(self, request: GenerationRequest) -> GenerationResult | TandemError: ...

    def stream(self, request: GenerationRequest) -> EngineStream: ...

    async def agreement(self, request: GenerationRequest, answer_ids: list[int]) -> int: ...

    async def load(self) -> EngineLoad: ...

    async def info(self) -> EngineInfo: ...

    async def cost_profile(self) -> CostProfile | None: ...


async def cancelling(response):
    """Await a DeploymentResponse; if this await is cancelled (a timeout, a client gone), cancel
    the engine's work too. Ray Serve only does that when the whole HTTP request is cancelled, so
    without it a timed-out attempt keeps its scheduler slot while its failover runs elsewhere."""
    try:
        return await response
    except asyncio.CancelledError:
        response.cancel()
        raise


async def engine_infos(engines: dict[str, EngineClient], timeout_s: float) -> list[EngineInfo]:
    """Every engine's `info()`, asked at once, in `engines`' order; `asyncio.TimeoutError` after
    `timeout_s`, or the first engine's error. A caller that goes away meanwhile (a load balancer's
    health check giving up on /ready) cancels the questions still open, and every question's outcome
    is retrieved whatever happens: `wait_for(gather(...))` left the gathering future's error (or its
    cancellation) unretrieved, and asyncio logged `_GatheringFuture exception was never retrieved`
    with a traceback for each abandoned /ready."""
    asked = [asyncio.ensure_future(e.info()) for e in engines.values()]
    try:
        _, pending = await asyncio.wait(asked, timeout=timeout_s)
    finally:
        for task in asked:
            task.cancel()  # no-op for those done
            task.add_done_callback(_retrieve)
    if pending:
        raise asyncio.TimeoutError(f"{len(pending)} engine(s) did not answer within {timeout_s} s")
    return [task.result() for task in asked]


def _retrieve(task: asyncio.Future) -> None:
    """Mark an abandoned question's outcome as seen: an engine error nobody waits for is not a traceback."""
    if not task.cancelled():
        task.exception()


class HandleClient:
    """An `EngineClient` over a Ray Serve `DeploymentHandle` to an `EngineDeployment`."""

    def __init__(self, handle):
        self.handle = handle

    async def generate(self, request: GenerationRequest) -> GenerationResult | TandemError:
        return await cancelling(self.handle.generate.remote(request))

    def stream(self, request: GenerationRequest) -> EngineStream:
        return self.handle.options(stream=True).stream.remote(request)  # a DeploymentResponseGenerator: iterable, cancel()

    async def agreement(self, request: GenerationRequest, answer_ids: list[int]) -> int:
        return await cancelling(self.handle.agreement.remote(request, answer_ids))

    async def load(self) -> EngineLoad:
        return await self.handle.load.remote()

    async def info(self) -> EngineInfo:
        return await cancelling(self.handle.info.remote())

    async def cost_profile(self) -> CostProfile | None:
        return await self.handle.cost_profile.remote()


def engine_client(engine) -> EngineClient | None:
    """`engine` as an EngineClient: a DeploymentHandle (what `router.app.build_app` binds) wrapped in
    a HandleClient; an EngineClient (or None: no engine) as it is."""
    from ray.serve.handle import DeploymentHandle

    return HandleClient(engine) if isinstance(engine, DeploymentHandle) else engine
