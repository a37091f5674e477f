"""The thread-per-request helper: decode requests without a scheduler, for tests, benchmarks and warm-up.

The replica never serves through it: a Serve replica drives the engine's served contract
(`validate`, `row`, `steps`: engines.replica.engine) from its scheduler (engines.replica.scheduler),
which batches concurrent requests step by step. `DirectDecoding` is mixed into the engine so that a
test, a benchmark or the replica's warm-up can decode requests directly:

- `generate(request) -> GenerationResult`: decode one request to completion.
- `generate_batch(requests) -> list[GenerationResult]`: decode several at once, in order. Requests are
  grouped by mode (and, for block/verified, by denoising settings); each group runs one forward per
  step for all its rows. A request gets the same tokens alone or batched. All-or-nothing: every
  request is validated before any is decoded.
- `stream(request) -> AsyncIterator[str]`: text deltas as tokens are committed, on a thread of its
  own; they join to the `generate` text. `stream_with_result` ends with the `GenerationResult`.
- `run(rows, mode, params, admit, max_batch)`: one compatible group's loop, drained.

Decoding here is serialized by the engine's lock: one group at a time per engine.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import AsyncIterator

from engines.decode.canvas_settings import BlockParams
from engines.decode.rows import Admit, Row
from engines.decode.steps import drain
from engines.types import GenerationRequest, GenerationResult


class DirectDecoding:
    """Decoding without a scheduler, on the engine it is mixed into (which has `validate`, `row`,
    `steps` and `_lock`)."""

    def run(self, rows: list[Row], mode: str, params: BlockParams | None, admit: Admit | None = None, max_batch: int = 0) -> None:
        """Decode one compatible group of rows to its end; `admit` lets newcomers join between steps."""
        drain(self.steps(rows, mode, params, admit, max_batch))

    def _decode(self, rows: list[Row], params: list[BlockParams | None]) -> None:
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, (row, p) in enumerate(zip(rows, params)):
            groups[(row.request.mode, p)].append(i)
        with self._lock:
            for (mode, p), idx in groups.items():
                self.run([rows[i] for i in idx], mode, p)

    def generate_batch(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        checked = [self.validate(r) for r in requests]  # all-or-nothing: validate before decoding any
        rows = [self.row(r, ids) for r, (ids, _) in zip(requests, checked)]
        self._decode(rows, [p for _, p in checked])
        return [r.result() for r in rows]

    def generate(self, request: GenerationRequest) -> GenerationResult:
        return self.generate_batch([request])[0]

    async def stream_with_result(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult]:
        """Like `stream`, then one final item: the `GenerationResult`."""
        ids, params = await asyncio.to_thread(self.validate, request)  # tokenizing stays off the event loop
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        row = self.row(request, ids, on_text=lambda delta: loop.call_soon_threadsafe(queue.put_nowait, delta))

        def work() -> None:
            try:
                self._decode([row], [params])
                loop.call_soon_threadsafe(queue.put_nowait, row.result())
            except BaseException as exc:  # surface decode failures to the consumer
                loop.call_soon_threadsafe(queue.put_nowait, exc)

        thread = threading.Thread(target=work, name=f"decode-{request.request_id}", daemon=True)
        thread.start()
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, GenerationResult):
                return

    async def stream(self, request: GenerationRequest) -> AsyncIterator[str]:
        async for item in self.stream_with_result(request):
            if isinstance(item, str):
                yield item
