"""The engine interface (router.decision.engine_client): an awaited engine call that is cancelled
cancels the engine's work too, and what the gateway is handed becomes an EngineClient."""

from __future__ import annotations

import asyncio

from router.decision.engine_client import cancelling, engine_client
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
