"""Per-replica scheduler: step-level batching of concurrent requests over one engine, the modes'
batches interleaved step by step on one copy of the weights.

- `submit(request)` and `stream(request)` validate at once, in a thread off the event loop (bad input
  raises 400 before it queues), enqueue (a full queue raises `EngineOverloadedError`, 429) and await.
- Worker threads decode, in two lanes (`lane`): canvases (block mode) and tokens (verified and AR).
  One thread steps both (`lane_threads` 1: a GPU's one stream), or each lane has its own (2: a CPU
  with a core per lane; torch's operators release the GIL). Each lane with work has one running
  batch: the oldest waiting request of that lane and every compatible one up to `max_batch_size`
  (`BatchKey.takes`: same mode and settings; an AR request fits any verified batch that drafts, as a
  row that never drafts: one encoder pass for both). Between steps (engines.decode.steps) a running batch admits
  compatible newcomers into free slots; finished rows leave at once.
- Fairness between modes on one thread (`pick`, engines.replica.lanes): the running batch charged
  the least decode time steps next, a step's seconds shared among the modes whose rows it served, so
  every mode with work gets an equal share of the thread whatever its steps cost: a stream of
  canvases never holds AR's tokens back, nor the reverse. With a thread per lane the lanes take no
  turns: where they compete for a core, the OS weighs them (`canvas_nice`: a token step of a few ms
  before a canvas pass of tens; CFS gives each thread its weight's share, so neither starves).
- The served AR path: an AR request's batch is a verified batch (`tokens_key`): AR requests decode in
  verified's loop (engines.modes.verified) as rows that never draft, with a waiting verified request's
  settings or the engine's default ones. AR's own loop (engines.modes.ar) serves only the rows other
  loops finish by AR steps and the thread-per-request helper (engines.replica.direct).
- Fairness within a lane: a batch stops admitting once a request of its lane it cannot take has
  waited `max_wait_s`. A cancelled row (its client went away) leaves at its batch's next step, or
  the queue at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

from engines.replica.engine import DiffusionEngine
from engines.errors import EngineOverloadedError, EngineUnavailableError
from engines.decode.rows import Row
from engines.replica.lanes import Batch, BatchKey, lower_priority, pick, serves
from engines.replica.scheduler_config import SchedulerConfig, SchedulerStats
from engines.types import LANES, EngineLoad, GenerationRequest, GenerationResult

log = logging.getLogger("tandem.scheduler")


class Scheduler:
    def __init__(self, engine: DiffusionEngine, config: SchedulerConfig | None = None,
                 step_clock: Callable[[], float] = time.perf_counter):
        self.engine = engine
        self.config = config or SchedulerConfig()
        # times each decode step (seconds) for the fairness charge and `stats.decode_s`: a test passes a
        # clock whose steps take what it says, to check the charging rule without timing the machine
        self.step_clock = step_clock
        self.stats = SchedulerStats()
        self._pending: deque[tuple[BatchKey, Row]] = deque()  # waiting requests, oldest first, with their keys
        self._cv = threading.Condition()
        self._batches: dict[str, Batch] = {}  # lane -> its running batch
        # after every step, from its worker: (the batch, the worker's batches' used time when picked, the step's charge)
        self.on_step: Callable[[Batch, dict[str, float], float], None] | None = None
        self.interleave = self.config.interleave if self.config.interleave is not None else not replays_cuda_graphs(engine)
        self._closed = False
        # Each worker thread steps the batches of its lanes (None: every lane, one thread for all).
        groups = [frozenset({name}) for name in LANES] if self.interleave and self.config.lane_threads > 1 else [None]
        self._workers = [threading.Thread(target=self._work, args=(g,), name=f"tandem-scheduler-{'-'.join(g or ['all'])}", daemon=True)
                         for g in groups]
        for worker in self._workers:
            worker.start()

    # ---- the async side ------------------------------------------------------------------------

    async def _enqueue(self, request: GenerationRequest, loop: asyncio.AbstractEventLoop, on_text=None) -> tuple[Row, asyncio.Future]:
        future = loop.create_future()

        def done(row: Row) -> None:
            self._count(row)  # before the caller can see its result: stats never lag a finished request
            if not loop.is_closed():  # a closed loop has no caller left to tell (a cancelled row the worker finished)
                loop.call_soon_threadsafe(row.settle, future)

        def prepare() -> tuple[Row, BatchKey]:
            ids, params = self.engine.validate(request)
            return self.engine.row(request, ids, on_text=on_text, on_done=done), BatchKey(request.mode, params)

        # Prepared in a thread, never on the replica's event loop: it answers probes whatever a request costs.
        row, key = await asyncio.to_thread(prepare)
        with self._cv:
            if self._closed:
                raise EngineUnavailableError("the engine is shutting down")
            if len(self._pending) >= self.config.max_queue:
                self.stats.rejected += 1
                raise EngineOverloadedError(
                    f"the {request.mode} engine's queue is full ({self.config.max_queue} waiting); retry shortly",
                    retry_after_s=self.config.retry_after_s,
                )
            self._pending.append((key, row))
            self.stats.submitted += 1
            self._cv.notify_all()  # the worker of its lane, whichever that is
        return row, future

    async def submit(self, request: GenerationRequest) -> GenerationResult:
        row, future = await self._enqueue(request, asyncio.get_running_loop())
        try:
            return await future
        except asyncio.CancelledError:
            self.cancel(row)
            raise

    async def stream(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult]:
        """Text deltas as they are committed, then the `GenerationResult`."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        row, future = await self._enqueue(request, loop, on_text=lambda d: loop.call_soon_threadsafe(queue.put_nowait, d))
        future.add_done_callback(queue.put_nowait)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, asyncio.Future):
                    yield item.result()  # raises the decode error, if any
                    return
                yield item
        finally:
            if not future.done():  # the consumer went away mid-stream
                self.cancel(row)

    def cancel(self, row: Row) -> None:
        row.cancelled = True
        with self._cv:
            for i, (_, waiting) in enumerate(self._pending):
                if waiting is row:
                    del self._pending[i]
                    self.stats.cancelled += 1
                    row.close()
                    return
            self.stats.cancelled += 1

    def load(self) -> EngineLoad:
        """Queue depth and running rows (every mode's batch) and each mode's requests, for load-aware routing and /admin/stats."""
        with self._cv:
            by_mode: dict[str, int] = {}
            for key, _row in self._pending:
                by_mode[key.mode] = by_mode.get(key.mode, 0) + 1
            for batch in self._batches.values():
                for row in batch.live():
                    by_mode[row.request.mode] = by_mode.get(row.request.mode, 0) + 1
            return EngineLoad(
                queued=len(self._pending),
                running=sum(b.running() for b in self._batches.values()),
                capacity=self.config.max_batch_size,
                max_queue=self.config.max_queue,
                stats={k: dict(v) if isinstance(v, dict) else v for k, v in vars(self.stats).items()},  # copies: the worker updates them
                by_mode={m: n for m, n in by_mode.items() if n},
                lane_threads=len(self._workers),
            )

    def alive(self) -> bool:  # every worker thread still runs (a replica whose decoding died should restart)
        return all(worker.is_alive() for worker in self._workers)

    def close(self, wait_s: float = 0.0) -> None:  # no more requests; running batches finish; wait_s: for the workers
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        for worker in self._workers if wait_s else ():
            worker.join(wait_s)

    # ---- the worker ----------------------------------------------------------------------------

    def _take(self, key: BatchKey, n: int) -> list[Row]:
        """Up to `n` waiting rows a batch keyed `key` takes, oldest first (caller holds the lock)."""
        taken, rest = [], deque()
        for k, row in self._pending:
            if key.takes(k) and len(taken) < n:
                taken.append(row)
            else:
                rest.append((k, row))
        self._pending = rest
        return taken

    def _count(self, row: Row) -> None:
        """Count a row that left its batch (its on_done); cancelled rows were counted by `cancel`."""
        with self._cv:
            if row.error is not None:
                self.stats.failed += 1
            elif not row.cancelled:
                self.stats.completed += 1

    def _admit(self, batch: Batch, free: int) -> list[Row]:
        with self._cv:
            # Between steps: rows that left the batch stop counting as running (a batch can run for
            # as long as newcomers keep joining, so waiting for its end would overcount).
            batch.rows = [r for r in batch.rows if r.finish_reason is None and r.error is None]
            if free <= 0 or not self._pending:
                return []
            mine = batch.key.lane  # interleaving, only a request of its own lane waits for this batch to drain
            oldest = next(((k, r) for k, r in self._pending if k.lane == mine or not self.interleave), None)
            if oldest is not None and not batch.key.takes(oldest[0]) and time.perf_counter() - oldest[1].started > self.config.max_wait_s:
                return []  # let the batch drain so that its mode's waiting group starts
            rows = self._take(batch.key, free)
            batch.rows += rows
            self.stats.admitted_mid_batch += len(rows)
            return rows

    def _start_batches(self, lanes: frozenset | None) -> list[Batch]:
        """A batch for every lane of `lanes` (None: all) with waiting requests and no running batch (caller holds the lock)."""
        started = []
        while True:
            if self._batches and not self.interleave:
                return started
            key = next((k for k, _ in self._pending if k.lane not in self._batches and serves(lanes, k.mode)), None)
            if key is None:
                return started
            if key.mode == "ar":
                key = self.tokens_key(key)
            rows = self._take(key, self.config.max_batch_size)
            clock = min((b.used_s for b in self._batches.values() if serves(lanes, b.key.mode)), default=0.0)
            batch = self._batches[key.lane] = Batch(key, rows, used_s=clock)
            self.stats.batches += 1
            started.append(batch)

    def tokens_key(self, ar: BatchKey) -> BatchKey:
        """The served AR path: the batch an AR request starts is verified's, whose rows AR's join as rows that
        never draft, with a waiting verified request's settings, or the engine's (caller holds the lock)."""
        return next((k for k, _ in self._pending if k.mode == "verified" and k.takes(ar)), BatchKey("verified", self.engine.verified_params))

    def _work(self, lanes: frozenset | None) -> None:
        """A worker's loop: step the running batches of `lanes` (None: every lane), one step at a time."""
        mine = lambda: [b for b in self._batches.values() if serves(lanes, b.key.mode)]  # noqa: E731
        lower_priority(self.config.canvas_nice if lanes == frozenset({"canvas"}) else 0)
        while True:
            with self._cv:
                while not any(serves(lanes, k.mode) for k, _ in self._pending) and not mine() and not self._closed:
                    self._cv.wait()
                if self._closed and not mine():
                    return
                for batch in [] if self._closed else self._start_batches(lanes):  # closing: the running batches finish
                    batch.steps = self._open(batch)
                batch = pick(running := mine())
                clocks = {b.key.lane: b.used_s for b in running}
                served = {row.request.mode for row in batch.live()} or {batch.key.mode}  # a prefill's rows are not live yet
            began = self.step_clock()
            going = self._step(batch)
            seconds = self.step_clock() - began
            charged = seconds / len(served)  # every mode with work gets an equal share: a step for two modes counts half
            batch.used_s += charged
            with self._cv:
                for mode in served:
                    self.stats.steps[mode] = self.stats.steps.get(mode, 0) + 1
                    self.stats.decode_s[mode] = round(self.stats.decode_s.get(mode, 0.0) + seconds, 6)
                if not going:
                    del self._batches[batch.key.lane]
            if self.on_step is not None:
                self.on_step(batch, clocks, charged)

    def _open(self, batch: Batch):
        """The batch's decode loop (engines.decode.steps); None when it cannot start (its rows fail at its first step)."""
        key = batch.key
        try:
            return self.engine.steps(list(batch.rows), key.mode, key.params, admit=lambda n: self._admit(batch, n),
                                     max_batch=self.config.max_batch_size)
        except Exception as exc:
            batch.failure = exc
            return None

    def _step(self, batch: Batch) -> bool:
        """One step of `batch`; False when its loop ended (its rows all left) or failed."""
        try:
            if batch.steps is None:
                raise batch.failure
            next(batch.steps)
            return True
        except StopIteration:
            return False
        except Exception as exc:  # a failed batch fails its rows cleanly; the worker and the other batches go on
            log.exception("decode batch failed")
            with self._cv:
                unfinished = [r for r in batch.rows if r.finish_reason is None and r.error is None]
            for row in unfinished:
                row.error = EngineUnavailableError(f"the {batch.key.mode} engine failed: {type(exc).__name__}: {exc}")
                row.close()
            return False


def replays_cuda_graphs(engine) -> bool:
    """Whether the engine's compiled calls replay CUDA graphs (engines.batch.compiled: reduce-overhead on CUDA)."""
    return bool(getattr(engine, "compiled", False)) and engine.model.device.type == "cuda"

