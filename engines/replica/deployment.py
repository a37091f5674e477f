"""The engine as a Ray Serve deployment (a plain class; `router.app.build_app` binds it).

One replica = one model in memory + one `Scheduler`. The same class serves as `BlockEngine`
(block and verified mode: verification rides on the commit pass of the same weights) and as
`AREngine` in the split layout, and as `SharedEngine` (every mode from one copy of the weights,
the scheduler interleaving the modes' batches step by step) in the shared one
(router.decision.layouts); `modes` says which requests a replica takes.

Errors cross the handle boundary as values (a `TandemError` returned, not raised), so that
their status, code and Retry-After reach the gateway intact rather than wrapped in Ray's
task error; results are typed: `GenerationResult`, `EngineLoad`, `EngineInfo`, `CostProfile`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import AsyncIterator

from engines.cost import CostProfile
from engines.defaults import MAX_BATCH_SIZE, MAX_QUEUE, MAX_WAIT_S, default_checkpoint
from engines.errors import InvalidRequestError, TandemError
from engines.batch.prefix_cache import DEFAULT_CACHE_TOKENS
from engines.process import ray_node, replica_name, rss_mb
from engines.types import EngineInfo, EngineLoad, GenerationRequest, GenerationResult

log = logging.getLogger("tandem.engine")


class EngineDeployment:
    def __init__(
        self,
        checkpoint: str | None = None,
        modes: tuple[str, ...] = ("block", "verified", "ar"),
        dtype: str = "float32",
        device: str = "cpu",
        threads: int | None = None,
        max_batch_size: int = MAX_BATCH_SIZE,
        lane_threads: int = 1,
        canvas_nice: int = 0,
        max_queue: int = MAX_QUEUE,
        max_wait_s: float = MAX_WAIT_S,
        prefix_cache_tokens: int = DEFAULT_CACHE_TOKENS,
        sure_entropy: float | None = None,
        compile: str = "off",
        stop_check_every: int = 1,
        quantization: str = "none",
    ):
        import torch

        from engines.replica.engine import DiffusionEngine
        from engines.replica.scheduler import Scheduler, SchedulerConfig

        if threads:
            torch.set_num_threads(threads)
        self.modes = tuple(modes)
        self.engine = DiffusionEngine.from_checkpoint(checkpoint or default_checkpoint(), dtype=dtype, device=device,
                                                      prefix_cache_tokens=prefix_cache_tokens, compile=compile, quantization=quantization)
        self.engine.sure_entropy = sure_entropy
        self.engine.stop_check_every = stop_check_every
        if self.engine.compiled:  # the replica reports ready (its __init__ returns) only once its calls are compiled
            from engines.replica.warm_up import warm_up

            log.info("engine compiled its calls for %s in %.1f s", self.modes, warm_up(self.engine, self.modes))
        self.scheduler = Scheduler(self.engine, SchedulerConfig(max_batch_size=max_batch_size, max_queue=max_queue, max_wait_s=max_wait_s,
                                                                   lane_threads=lane_threads, canvas_nice=canvas_nice))
        self.replica = replica_name()
        log.info("engine ready: %s, modes %s", self.engine.path, self.modes)

    def _check_mode(self, request: GenerationRequest) -> None:
        if request.mode not in self.modes:
            raise InvalidRequestError(f"this engine serves {list(self.modes)}, not {request.mode!r}", param="mode")

    async def generate(self, request: GenerationRequest) -> GenerationResult | TandemError:
        try:
            self._check_mode(request)
            return await self._with_logprobs(request, await self.scheduler.submit(request))
        except TandemError as exc:
            return exc

    async def _with_logprobs(self, request: GenerationRequest, result: GenerationResult) -> GenerationResult:
        """Logprobs, when asked, from one encoder pass over the finished answer (off the scheduler)."""
        import asyncio

        if request.logprobs is not None:
            result.logprobs = await asyncio.to_thread(self.engine.logprobs, request, result.token_ids, request.logprobs)
        return result

    async def stream(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult | TandemError]:
        """Text deltas, then the GenerationResult (or a TandemError in place of either)."""
        try:
            self._check_mode(request)
            async for item in self.scheduler.stream(request):
                yield await self._with_logprobs(request, item) if isinstance(item, GenerationResult) else item
        except TandemError as exc:
            yield exc

    async def agreement(self, request: GenerationRequest, answer_ids: list[int]) -> int:
        """Shadow verification: the accepted prefix of a finished block answer, in one encoder pass
        (off the scheduler: it never holds up the decode batches)."""
        import asyncio

        return await asyncio.to_thread(self.engine.agreement, request, answer_ids)

    async def load(self) -> EngineLoad:
        """The gateway's load poll, which is also its health probe: answered on the replica's event
        loop (an async method: no thread pool to wait for), which nothing a request costs ever blocks
        (the scheduler prepares requests in threads and decodes in its own), so a live replica answers
        it at any load."""
        load = self.scheduler.load()
        prefixes = {"prefix_cache": self.engine.prefix_cache.stats()} if self.engine.prefix_cache is not None else {}
        return dataclasses.replace(load, stats=load.stats | prefixes, pid=os.getpid(), rss_mb=rss_mb(), node=ray_node(), replica=self.replica)

    def info(self) -> EngineInfo:
        return EngineInfo(checkpoint=self.engine.path.name, modes=list(self.modes), canvas_length=self.engine.config.canvas_length,
                          context_length=self.engine.context_length, max_chars_per_token=self.engine.prompt_encoder.limit.max_chars_per_token,
                          facts=self.engine.facts)

    def cost_profile(self) -> CostProfile | None:
        """The checkpoint's measured cost profile, if it ships one."""
        return CostProfile.load(self.engine.path)

    def check_health(self) -> None:
        """Ray Serve calls this periodically; a dead scheduler thread restarts the replica."""
        if not self.scheduler.alive():
            raise RuntimeError("a scheduler worker thread died")

    def __del__(self):
        scheduler = getattr(self, "scheduler", None)
        if scheduler is not None:
            scheduler.close()
