"""One scheduler, one copy of the weights, every mode: two lanes' batches interleave step by step
(engines.replica.scheduler, engines.decode.steps), canvases (block) and tokens (verified, with AR's rows riding
in its batches: one encoder pass for both modes' tokens). Each lane with work gets its own batch at
once; the worker steps the batch charged the least decode time, a step's time shared among the modes
it served, so a long request of one mode never holds another mode's request back; rows still join
and leave mid-batch, cancel cleanly, reuse a prompt head another mode prefilled, and get the same
tokens as alone."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from engines import DiffusionEngine, GenerationRequest, GenerationResult
from engines.replica.lanes import lane
from engines.replica.scheduler import Scheduler, SchedulerConfig
from tests.engines.factories import PROMPTS, chat
from tests.helpers import ManualClock


@pytest.fixture
def scheduler(engine):
    s = Scheduler(engine, SchedulerConfig(max_batch_size=4, max_queue=16))
    trace: list[tuple[str, dict[str, float], float]] = []  # (lane stepped, every running batch's used time before it, its step's charge)
    s.on_step = lambda batch, clocks, charged: trace.append((batch.key.lane, clocks, charged))
    s.trace = trace
    yield s
    s.close()


def long(mode: str, seed: int = 0, tokens: int = 3000) -> GenerationRequest:
    return chat(PROMPTS[seed], mode=mode, seed=seed, max_new_tokens=tokens, canvas=8, max_denoising_steps=2, stop_token_ids=[])


def short(mode: str, seed: int = 1) -> GenerationRequest:
    return chat(PROMPTS[seed], mode=mode, seed=seed, max_new_tokens=16, canvas=8, max_denoising_steps=3, stop_token_ids=[])


async def until(condition, tries: int = 2000) -> bool:
    """Wait (on the event loop, a step at a time) until `condition()` holds."""
    for _ in range(tries):
        if condition():
            return True
        await asyncio.sleep(0.005)
    return False


def check_rule(trace) -> None:
    """The fairness rule, step by step: the batch that steps is one that had used the least time;
    between two steps of a batch whose last step was charged d, every other batch is charged at
    most d plus its own longest step."""
    for mode, clocks, _ in trace:
        assert clocks[mode] <= min(clocks.values()) + 1e-9, (mode, clocks)
    longest: dict[str, float] = {}
    for mode, _, seconds in trace:
        longest[mode] = max(longest.get(mode, 0.0), seconds)
    last: dict[str, int] = {}
    for i, (mode, clocks, seconds) in enumerate(trace):
        if mode in last:
            j = last[mode]
            between: dict[str, float] = {}
            for other, _, s in trace[j + 1 : i]:
                between[other] = between.get(other, 0.0) + s
            d = trace[j][2]
            for other, spent in between.items():
                assert spent <= d + longest[other] + 1e-9, (mode, other, spent, d, longest[other])
        last[mode] = i


@pytest.mark.parametrize("long_mode,short_mode", [("ar", "block"), ("block", "ar"), ("verified", "block"), ("block", "verified")])
def test_a_long_request_of_one_mode_does_not_hold_another_back(scheduler, long_mode, short_mode, drafts_anywhere):
    async def run():
        first = asyncio.ensure_future(scheduler.submit(long(long_mode)))
        assert await until(lambda: scheduler.load().running == 1)
        answer = await scheduler.submit(short(short_mode))
        assert not first.done(), f"the {short_mode} request waited for the long {long_mode} one"
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        return answer

    answer = asyncio.run(run())
    assert isinstance(answer, GenerationResult) and len(answer.token_ids) == 16
    trace = scheduler.trace
    check_rule(trace)
    # While both ran, each mode had a fair share of the decode time: the short request's steps, from
    # its first to its last, took about half of it (the rule, with one step either way of slack).
    long_lane, short_lane = lane(long_mode), lane(short_mode)
    steps = [i for i, (name, _, _) in enumerate(trace) if name == short_lane]
    window = trace[steps[0] : steps[-1] + 1]
    used = {name: sum(s for n, _, s in window if n == name) for name in (long_lane, short_lane)}
    assert used[long_lane] > 0, "the long request did not step while the short one ran"
    longest_other = max(s for n, _, s in window if n == long_lane)
    assert used[long_lane] <= used[short_lane] + 2 * longest_other, used


@pytest.mark.parametrize("long_mode,short_mode", [("verified", "ar"), ("ar", "verified")])
def test_ar_and_verified_rows_decode_in_one_batch_with_the_tokens_they_get_alone(engine, scheduler, long_mode, short_mode, drafts_anywhere):
    """AR's rows ride in verified's batch: every step that served the short request also served the
    long one (one encoder pass for both modes' tokens), no second batch ran, and the short request
    got the tokens it gets alone without waiting for the long one."""
    most_batches = [0]

    async def run():
        first = asyncio.ensure_future(scheduler.submit(long(long_mode)))
        assert await until(lambda: scheduler.load().running == 1)
        second = asyncio.ensure_future(scheduler.submit(short(short_mode)))
        while not second.done():
            most_batches[0] = max(most_batches[0], len(scheduler._batches))
            await asyncio.sleep(0.002)
        assert not first.done(), f"the {short_mode} request waited for the long {long_mode} one"
        # every step so far served the long request (the worker counts a step's modes before it traces it)
        steps, served = len(scheduler.trace), dict(scheduler.load().stats["steps"])
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        return second.result(), steps, served

    answer, steps, served = asyncio.run(run())
    assert answer.token_ids == engine.generate(short(short_mode)).token_ids
    assert most_batches[0] == 1, "the two modes' rows decoded in batches of their own"
    assert served[short_mode] > 0 and served[long_mode] >= steps, (served, steps)


def test_a_step_that_serves_two_modes_is_charged_to_each_half(engine, drafts_anywhere):
    """Block, verified and AR rows at once: the tokens lane serves two modes, so the modes' equal
    shares give it twice the decode time of the canvas lane (charged the full time, the lanes would
    split it evenly). Every step takes STEP_S on the scheduler's own clock (tests.helpers.ManualClock
    with a tick), so the split is exact, whatever the machine's load does to real steps."""
    step_s = 0.5  # every read moves the clock on by step_s: a step, timed between two reads, takes step_s
    s = Scheduler(engine, SchedulerConfig(max_batch_size=4, max_queue=16), step_clock=ManualClock(tick=step_s))
    trace: list[str] = []
    s.on_step = lambda batch, clocks, charged: trace.append(batch.key.lane)

    async def run():
        tasks = [asyncio.ensure_future(s.submit(long(mode, seed=i))) for i, mode in enumerate(("block", "verified", "ar"))]
        assert await until(lambda: s.load().running == 3)
        start = len(trace)
        assert await until(lambda: len(trace) >= start + 10), "the batches stopped stepping"
        before = s.load().stats["decode_s"]  # from here on every row decodes: no prefill
        assert await until(lambda: len(trace) >= start + 90), "the batches stopped stepping"
        after = s.load().stats["decode_s"]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert await until(lambda: s.load().running == 0)
        return {mode: after[mode] - before[mode] for mode in ("block", "verified", "ar")}

    try:
        seconds = asyncio.run(run())  # a mode's decode_s counts every step that served it, in full
    finally:
        s.close()
    assert seconds["verified"] == seconds["ar"], "AR's and verified's rows stepped apart"
    # twice the canvas lane's steps, to a step of each lane (where the window's ends cut the turns)
    assert abs(seconds["ar"] - 2 * seconds["block"]) <= 2 * step_s, seconds
    assert seconds["block"] >= 20 * step_s, seconds  # the window held both lanes' steps


def test_interleaving_changes_no_token_and_rows_join_their_modes_batch(engine, scheduler, drafts_anywhere):
    """Requests of every mode, staggered: each mode runs one batch that newcomers of its mode join
    between steps, the three batches step in turns, and every answer is the one it gets alone."""
    lengths = [30, 9, 22, 5, 17, 12, 26, 7, 14]
    requests = [chat(p, mode=("ar", "block", "verified")[i % 3], seed=i, max_new_tokens=n, canvas=8, max_denoising_steps=2, stop_token_ids=[])
                for i, (p, n) in enumerate(zip(PROMPTS + PROMPTS, lengths))]
    most_running = [0]

    async def run():
        async def one(i, r):  # staggered by the scheduler's steps: request i once i steps have run
            assert await until(lambda: len(scheduler.trace) >= i), f"the scheduler stopped stepping before request {i}"
            return await scheduler.submit(r)

        tasks = asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        while not tasks.done():
            most_running[0] = max(most_running[0], len(scheduler._batches))
            await asyncio.sleep(0.002)
        return await tasks

    results = asyncio.run(run())
    assert most_running[0] >= 2, "the modes' batches never ran at the same time"
    assert scheduler.stats.admitted_mid_batch > 0, "no request joined its mode's running batch"
    modes_in_turn = [m for m, _, _ in scheduler.trace]
    assert any(a != b for a, b in zip(modes_in_turn, modes_in_turn[1:])), "the modes never took turns"
    check_rule(scheduler.trace)
    for request, result in zip(requests, results):
        assert result.token_ids == engine.generate(request).token_ids, request.mode
    assert scheduler.stats.completed == len(requests)


def test_a_cancelled_row_leaves_its_batch_and_the_other_modes_decode_on(scheduler, drafts_anywhere):
    async def run():
        block = asyncio.ensure_future(scheduler.submit(long("block", seed=0)))
        ar = asyncio.ensure_future(scheduler.submit(long("ar", seed=1)))
        joiner = asyncio.ensure_future(scheduler.submit(long("ar", seed=2)))
        assert await until(lambda: scheduler.load().running == 3), "the three rows never ran together"
        assert len(scheduler._batches) == 2  # block's batch and the tokens lane's, the second AR row joined the first's
        assert scheduler.load().by_mode == {"block": 1, "ar": 2}  # what routing prices the modes' turns by
        block.cancel()
        assert await until(lambda: scheduler.load().running == 2), "the cancelled block row is still decoding"
        assert scheduler.load().by_mode == {"ar": 2}
        assert await until(lambda: "canvas" not in scheduler._batches), "block's emptied batch did not end"
        joiner.cancel()
        assert await until(lambda: scheduler.load().running == 1)
        assert not ar.done(), "the AR row it shared a batch with must decode on"
        served = await scheduler.submit(short("verified"))  # a verified request joins the AR row's batch (its settings are its own)
        assert not ar.done()
        ar.cancel()
        assert await until(lambda: scheduler.load().running == 0)
        await asyncio.gather(block, ar, joiner, return_exceptions=True)
        return served

    assert len(asyncio.run(run()).token_ids) == 16
    assert scheduler.stats.cancelled == 3 and scheduler.stats.completed == 1


def test_a_prompt_head_prefilled_for_one_mode_serves_the_others(tiny_checkpoint, scheduler, engine):
    """One engine, one prefix cache: a block request's conversation head is reused by an AR and a
    verified request of the same conversation, with the tokens an engine without the cache gives."""
    plain = DiffusionEngine.from_checkpoint(tiny_checkpoint, prefix_cache_tokens=0)
    system = "You are a careful assistant. Answer with the fields asked for, nothing else, in the order asked. " * 4
    engine.prefix_cache.clear()

    def turn(mode: str) -> GenerationRequest:
        return GenerationRequest(messages=[{"role": "system", "content": system}, {"role": "user", "content": PROMPTS[0]}],
                                 mode=mode, max_new_tokens=12, seed=5, canvas=8, max_denoising_steps=2, stop_token_ids=[])

    head = engine.prefix_length(turn("ar"), engine.prompt_ids(turn("ar")))
    assert head > 0, "the test conversation has no head to reuse"

    async def run():
        cold = await scheduler.submit(turn("block"))
        return cold, await asyncio.gather(scheduler.submit(turn("ar")), scheduler.submit(turn("verified")))

    cold, warm = asyncio.run(run())
    assert cold.stats.prefix_tokens_reused == 0
    for result, mode in zip(warm, ("ar", "verified")):
        assert result.stats.prefix_tokens_reused == head, mode
        assert result.token_ids == plain.generate(turn(mode)).token_ids, mode


def test_without_interleaving_one_batch_runs_at_a_time(engine):
    """SchedulerConfig(interleave=False), what an engine replaying CUDA graphs gets: the scheduler
    before interleaving, a request of another mode waits for the running batch to end."""
    s = Scheduler(engine, SchedulerConfig(max_batch_size=4, max_queue=16, interleave=False))
    lanes: list[str] = []
    s.on_step = lambda batch, clocks, charged: lanes.append(batch.key.lane)
    try:
        async def run():
            first = asyncio.ensure_future(s.submit(long("ar", tokens=60)))
            assert await until(lambda: s.load().running == 1)
            return await asyncio.gather(first, s.submit(short("block")))

        asyncio.run(run())
    finally:
        s.close()
    assert lanes[0] == "tokens" and "canvas" in lanes, lanes
    assert lanes == sorted(lanes, key=lambda name: name != "tokens"), "the lanes' steps interleaved"


@pytest.fixture
def threaded(engine):
    """A scheduler whose lanes decode on a thread each (lane_threads 2, serve_config.shared.yaml's on a
    CPU), the canvas lane's at a lower OS priority."""
    s = Scheduler(engine, SchedulerConfig(max_batch_size=4, max_queue=16, lane_threads=2, canvas_nice=3))
    steps: list[tuple[str, str, float, float]] = []  # (lane, worker thread, start, end) of every step
    s.on_step = lambda batch, clocks, charged: steps.append(
        (batch.key.lane, threading.current_thread().name, time.perf_counter() - charged, time.perf_counter()))
    s.steps_seen = steps
    yield s
    s.close()


def test_with_a_thread_per_lane_the_lanes_decode_at_once(threaded):
    """Block and AR rows (one mode each, so a step is charged its whole time): the canvas lane's
    steps run on one worker thread and the tokens lane's on another, and their steps overlap in
    time (on one thread they never do: each step ends before the next starts)."""
    async def run():
        tasks = [asyncio.ensure_future(threaded.submit(long(mode, seed=i))) for i, mode in enumerate(("block", "ar"))]
        assert await until(lambda: threaded.load().running == 2)
        start = len(threaded.steps_seen)
        assert await until(lambda: len(threaded.steps_seen) >= start + 60), "the batches stopped stepping"
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert await until(lambda: threaded.load().running == 0)

    asyncio.run(run())
    assert threaded.load().lane_threads == 2
    steps = threaded.steps_seen
    threads = {name: {t for n, t, _, _ in steps if n == name} for name in ("canvas", "tokens")}
    assert all(len(t) == 1 for t in threads.values()) and threads["canvas"] != threads["tokens"], threads
    nice = {w.name.rsplit("-", 1)[-1]: os.getpriority(os.PRIO_PROCESS, w.native_id) for w in threaded._workers}
    assert nice["canvas"] == min(19, nice["tokens"] + 3), f"canvas_nice 3: {nice}"
    canvas = [(a, b) for n, _, a, b in steps if n == "canvas"]
    tokens = [(a, b) for n, _, a, b in steps if n == "tokens"]
    overlapping = sum(any(a < d and c < b for c, d in tokens) for a, b in canvas)
    assert overlapping >= len(canvas) // 4, f"{overlapping} of {len(canvas)} canvas steps overlapped a tokens step"


def test_with_a_thread_per_lane_every_answer_is_the_one_it_gets_alone(engine, threaded, drafts_anywhere):
    """Staggered requests of every mode, joining and leaving their lanes' batches on two threads:
    the same tokens as alone, and a cancelled row leaves while the other lane decodes on."""
    lengths = [30, 9, 22, 5, 17, 12, 26, 7, 14]
    requests = [chat(p, mode=("ar", "block", "verified")[i % 3], seed=i, max_new_tokens=n, canvas=8, max_denoising_steps=2, stop_token_ids=[])
                for i, (p, n) in enumerate(zip(PROMPTS + PROMPTS, lengths))]

    async def run():
        doomed = asyncio.ensure_future(threaded.submit(long("block", seed=4)))
        assert await until(lambda: threaded.load().running == 1)

        async def one(i, r):  # staggered by the lanes' steps: request i once i steps have run
            assert await until(lambda: len(threaded.steps_seen) >= i), f"the lanes stopped stepping before request {i}"
            return await threaded.submit(r)

        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        doomed.cancel()
        await asyncio.gather(doomed, return_exceptions=True)
        assert await until(lambda: threaded.load().running == 0), "the cancelled block row is still decoding"
        return results

    results = asyncio.run(run())
    assert threaded.stats.admitted_mid_batch > 0, "no request joined its lane's running batch"
    for request, result in zip(requests, results):
        assert result.token_ids == engine.generate(request).token_ids, request.mode
    assert threaded.stats.completed == len(requests) and threaded.stats.cancelled == 1
    threaded.close(wait_s=30)
    assert not any(worker.is_alive() for worker in threaded._workers), "a worker did not stop on close()"
