"""The engine interface (router.decision.engine_client): an awaited engine call that is cancelled
cancels the engine's work too, and what the gateway is handed becomes an EngineClient."""

from __future__ import annotations

import asyncio
import gc

import pytest

from router.decision.engine_client import cancelling, engine_client, engine_infos
from tests.router.local_engines import GoneEngine


def test_a_cancelled_wait_cancels_the_engines_work_and_an_answered_one_returns_it():
    # An asyncio future stands for a DeploymentResponse: awaitable, with cancel() (what Ray's has).
    async def run():
        loop = asyncio.get_running_loop()
        abandoned, answered = loop.create_future(), loop.create_future()
        waiting = asyncio.ensure_future(cancelling(abandoned))
        await asyncio.sleep(0)
        waiting.cancel()  # a timeout or a client gone
        await asyncio.gather(waiting, return_exceptions=True)
        loop.call_soon(answered.set_result, "answer")
        return abandoned.cancelled(), await cancelling(answered)

    assert asyncio.run(run()) == (True, "answer")


def test_an_engine_client_or_none_is_used_as_it_is():
    gone = GoneEngine()
    assert engine_client(gone) is gone
    assert engine_client(None) is None


class SlowEngine:
    """An engine whose `info()` is still pending when its caller gives up, then fails (as a Ray
    handle's response does when the engine restarts under it)."""

    def __init__(self, asked: asyncio.Event):
        self.asked = asked

    async def info(self):
        self.asked.set()
        try:
            await asyncio.sleep(60)
        finally:
            raise RuntimeError("the engine's replica died")


class QuickEngine:
    async def info(self):
        return "info"


def unretrieved_errors(work) -> list[str]:
    """What asyncio's exception handler reported (e.g. `exception was never retrieved`) while `work` ran."""
    seen = []

    async def run():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: seen.append(context["message"]))
        await work()
        await asyncio.sleep(0.05)
        gc.collect()  # abandoned futures report on collection
        await asyncio.sleep(0)

    asyncio.run(run())
    gc.collect()
    return seen


def test_a_client_giving_up_on_ready_while_an_engine_info_is_pending_leaves_no_traceback():
    """Issue 54: each abandoned GET /ready logged `_GatheringFuture exception was never retrieved`."""

    async def give_up():
        asked = asyncio.Event()
        ready = asyncio.ensure_future(engine_infos({"block": SlowEngine(asked), "ar": QuickEngine()}, timeout_s=5.0))
        await asked.wait()
        ready.cancel()  # the client went away: Starlette cancels the handler
        await asyncio.gather(ready, return_exceptions=True)

    async def time_out():
        asked = asyncio.Event()
        with pytest.raises(asyncio.TimeoutError):
            await engine_infos({"block": SlowEngine(asked)}, timeout_s=0.01)

    assert unretrieved_errors(give_up) == []
    assert unretrieved_errors(time_out) == []


class BrokenEngine:
    async def info(self):
        raise RuntimeError("the engine's replica died")


def test_engine_infos_answers_in_order_or_raises_the_engines_error():
    async def run():
        assert await engine_infos({"a": QuickEngine(), "b": QuickEngine()}, timeout_s=1.0) == ["info", "info"]
        with pytest.raises(RuntimeError, match="died"):
            await engine_infos({"a": QuickEngine(), "b": BrokenEngine()}, timeout_s=1.0)

    assert unretrieved_errors(run) == []
