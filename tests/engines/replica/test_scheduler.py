"""The scheduler: concurrent requests share batches, newcomers join running batches between steps
and still decode exactly as they would alone; full queues, cancellation and failures are clean."""

import asyncio
import threading

import pytest

from engines import EngineOverloadedError, EngineUnavailableError, GenerationResult
from engines.replica.scheduler import Scheduler, SchedulerConfig
from tests.engines.factories import PROMPTS, chat


@pytest.fixture
def scheduler(engine):
    s = Scheduler(engine, SchedulerConfig(max_batch_size=4, max_queue=8))
    yield s
    s.close()


async def wait_load(scheduler, predicate, timeout_s: float = 60.0) -> None:
    """Until `predicate(scheduler.load())` holds (a deadlock guard, not a timing claim)."""
    async with asyncio.timeout(timeout_s):
        while not predicate(scheduler.load()):
            await asyncio.sleep(0.005)


async def queued_behind_another_batch(scheduler, requests, mode):
    """Submits `requests` while the worker is held after a step of a long request of another lane
    (its on_step hook waits on a gate: each lane gets its own batch at once otherwise), so all of
    them wait together; then cancels that one and opens the gate. The worker starts a batch with
    the first `max_batch_size` of them, the holder's batch ends at its canvas or token boundary,
    and the rest can only join the new batch mid-batch, as its shortest rows finish, whatever the
    machine's speed."""
    other = "ar" if mode == "block" else "block"  # AR and verified rows share a lane (engines.replica.lanes.lane)
    gate = threading.Event()
    scheduler.on_step = lambda *_: gate.wait()
    holder = asyncio.ensure_future(scheduler.submit(chat(PROMPTS[7], mode=other, max_new_tokens=3000, stop_token_ids=[])))
    await wait_load(scheduler, lambda x: x.running == 1)
    tasks = [asyncio.ensure_future(scheduler.submit(r)) for r in requests]
    await wait_load(scheduler, lambda x: x.queued == len(requests))
    holder.cancel()
    await asyncio.gather(holder, return_exceptions=True)
    scheduler.on_step = None
    gate.set()
    return await asyncio.gather(*tasks)


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_joining_a_running_batch_changes_no_token(engine, scheduler, mode, drafts_anywhere):
    requests = [
        chat(p, mode=mode, seed=i, max_new_tokens=n, canvas=8, max_denoising_steps=2, stop_token_ids=[])
        for i, (p, n) in enumerate(zip(PROMPTS[:6], [30, 9, 22, 5, 17, 12]))
    ]
    results = asyncio.run(queued_behind_another_batch(scheduler, requests, mode))
    capacity = scheduler.config.max_batch_size
    assert scheduler.stats.admitted_mid_batch == len(requests) - capacity, "the rows past the first batch did not join it"
    assert scheduler.stats.batches == 2  # the holder's, then one for all six
    for request, result in zip(requests, results):
        assert result.token_ids == engine.generate(request).token_ids
    assert scheduler.stats.completed == len(requests) and scheduler.stats.cancelled == 1


def test_rows_that_finished_stop_counting_as_running(engine, scheduler):
    """A batch session lasts as long as newcomers keep joining; the load the router reads must
    count the rows decoding now, not every row the session ever held."""
    long = chat(PROMPTS[0], mode="ar", max_new_tokens=400, stop_token_ids=[])
    seen = []

    async def run():
        first = asyncio.ensure_future(scheduler.submit(long))
        for i in range(6):  # short ones join the long one's batch and leave
            await scheduler.submit(chat(PROMPTS[1 + i % 3], mode="ar", seed=i, max_new_tokens=3, stop_token_ids=[]))
            seen.append(scheduler.load().running)
        await first

    asyncio.run(run())
    assert scheduler.stats.admitted_mid_batch >= 1 and max(seen) <= 2  # the long row, and at most one joining
    assert scheduler.stats.completed == 7 and scheduler.load().running == 0


def test_full_queue_is_refused_with_retry_after(engine):
    scheduler = Scheduler(engine, SchedulerConfig(max_batch_size=1, max_queue=2, retry_after_s=2.5))
    try:

        async def flood():
            tasks = [asyncio.ensure_future(scheduler.submit(chat(PROMPTS[0], mode="ar", max_new_tokens=30, stop_token_ids=[]))) for _ in range(6)]
            return await asyncio.gather(*tasks, return_exceptions=True)

        outcomes = asyncio.run(flood())
        refused = [o for o in outcomes if isinstance(o, EngineOverloadedError)]
        served = [o for o in outcomes if isinstance(o, GenerationResult)]
        assert refused and served and len(refused) + len(served) == 6
        assert refused[0].status == 429 and refused[0].retry_after_s == 2.5
        assert scheduler.stats.rejected == len(refused)
    finally:
        scheduler.close()


def test_a_client_that_leaves_mid_stream_frees_its_slot(engine, scheduler):
    async def leave_early():
        stream = scheduler.stream(chat(PROMPTS[0], mode="ar", max_new_tokens=200, stop_token_ids=[]))
        async for _ in stream:
            break  # the client disconnects after the first delta
        await stream.aclose()
        for _ in range(200):  # the batch drops the row at its next step
            if scheduler.load().running == 0:
                return True
            await asyncio.sleep(0.01)
        return False

    assert asyncio.run(leave_early())
    assert scheduler.stats.cancelled == 1
    assert asyncio.run(scheduler.submit(chat(PROMPTS[1], mode="ar", max_new_tokens=4))).finish_reason in ("stop", "length")


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_a_row_that_joined_a_running_batch_is_dropped_at_the_next_step_when_its_caller_stops_waiting(engine, scheduler, mode, drafts_anywhere):
    """What the gateway does on a timeout or failover: it cancels its await; the row leaves the
    batch at the next step and the row it joined decodes on."""
    def long(seed):
        return chat(PROMPTS[seed], mode=mode, seed=seed, max_new_tokens=3000, canvas=8, max_denoising_steps=2, stop_token_ids=[])

    async def run():
        async def running(n):
            for _ in range(500):
                if scheduler.load().running == n:
                    return True
                await asyncio.sleep(0.01)
            return False

        first = asyncio.ensure_future(scheduler.submit(long(0)))
        assert await running(1)
        joiner = asyncio.ensure_future(scheduler.submit(long(1)))
        assert await running(2), "the second row never joined the running batch"
        joiner.cancel()
        assert await running(1), "the abandoned row is still decoding"
        assert not first.done(), "the row it joined must decode on"
        first.cancel()
        assert await running(0)
        await asyncio.gather(first, joiner, return_exceptions=True)

    asyncio.run(run())
    assert scheduler.stats.admitted_mid_batch >= 1
    assert scheduler.stats.cancelled == 2 and scheduler.stats.completed == 0


def test_stream_yields_deltas_then_the_result(engine, scheduler):
    async def run():
        return [item async for item in scheduler.stream(chat(PROMPTS[2], mode="block", seed=1, max_new_tokens=24, canvas=8, stop_token_ids=[]))]

    items = asyncio.run(run())
    assert isinstance(items[-1], GenerationResult)
    assert "".join(items[:-1]) == items[-1].text


def test_a_failing_batch_fails_its_requests_cleanly_and_the_worker_goes_on(engine, scheduler, monkeypatch):
    calls = {"n": 0}
    real_run = engine.steps

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated device fault")
        return real_run(*args, **kwargs)

    monkeypatch.setattr(engine, "steps", flaky)
    with pytest.raises(EngineUnavailableError, match="simulated device fault"):
        asyncio.run(scheduler.submit(chat(PROMPTS[0], mode="ar", max_new_tokens=4)))
    assert asyncio.run(scheduler.submit(chat(PROMPTS[0], mode="ar", max_new_tokens=4))).token_ids
    assert scheduler.stats.failed == 1
