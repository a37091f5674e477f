"""The Gateway's orchestration of one request (router.gateway.orchestration), in process: the shipped
tiny engine serving every mode (the shared layout) behind the EngineClient contract. A call is
routed, run and answered with its decision in the headers and its numbers in the stats; a forced
mode is honoured; a prompt that cannot fit is refused before routing; a stream's parts end in the
whole answer. (Failover: tests/router/test_failover.py; the HTTP face: test_ingress.py.)"""

from __future__ import annotations

import asyncio
import json

import pytest

from engines.errors import InvalidRequestError
from engines.types import MODES
from policies.stores import DEFAULT_POLICY_PATH
from router.gateway.answer_parts import Finished, TextDelta
from router.gateway.calls import chat_call
from router.gateway.openai_api import ChatCompletionRequest
from router.gateway.structured import output_spec
from tests.router.local_engines import LocalEngine

ASK = [{"role": "user", "content": "Extract the name as JSON: Alice Smith lives in Paris."}]


@pytest.fixture(scope="module")
def engine():
    from engines.replica.deployment import EngineDeployment

    return LocalEngine(EngineDeployment(modes=MODES, max_wait_s=0.001))


@pytest.fixture(scope="module")
def gateway(engine):
    """One Gateway for the module on one event loop (building one loads the router model; its routing
    view's poller belongs to the loop): `run(gw, work)` runs on it. Tests compare stats before and after."""
    from router.gateway.orchestration import Gateway

    loop = asyncio.new_event_loop()
    gw = Gateway(None, None, shared_engine=engine, policy_source=str(DEFAULT_POLICY_PATH), request_timeout_s=60.0, probe_interval_s=0.05)
    gw.loop = loop
    yield gw

    async def stop_polling():
        # asyncio.wait_for (3.11) can swallow a cancel that lands as its inner call finishes
        while gw.view._poller is not None and not gw.view._poller.done():
            gw.view._poller.cancel()
            await asyncio.sleep(0.01)

    loop.run_until_complete(stop_polling())
    loop.close()


def call(**body):
    req = ChatCompletionRequest.model_validate({"model": "tandem", "messages": ASK, "max_tokens": 8} | body)
    return chat_call(req, {}, output_spec(req))


def requests_by_mode(gw) -> dict[str, int]:
    return {m: s["requests"] for m, s in gw.stats.snapshot()["modes"].items()}


def run(gw, work):
    return gw.loop.run_until_complete(work())


def test_a_call_is_routed_run_and_answered_with_its_decision(gateway):
    c = call()
    before = requests_by_mode(gateway)
    reply = run(gateway, lambda: gateway.answer(c, {"x-request-id": "req-orchestration"}))
    mode = reply.headers["x-tandem-mode"]
    assert mode in MODES and reply.answer.tandem["mode"] == mode and reply.headers["x-tandem-policy-version"]
    assert c.request_id == "req-orchestration" and 1 <= reply.answer.output_tokens <= 8
    assert requests_by_mode(gateway) == before | {mode: before.get(mode, 0) + 1}


def test_a_model_alias_forces_its_mode(gateway):
    reply = run(gateway, lambda: gateway.answer(call(model="tandem-ar"), {}))
    assert reply.headers["x-tandem-mode"] == "ar" and reply.headers["x-tandem-route-reason"] == "forced_model"


def test_a_prompt_that_cannot_fit_is_refused_before_routing_and_counted(gateway):
    huge = call(messages=[{"role": "user", "content": "word " * 400_000}])
    before, errors = requests_by_mode(gateway), gateway.stats.snapshot()["errors"].get("400", 0)
    with pytest.raises(InvalidRequestError) as refused:
        run(gateway, lambda: gateway.answer(huge, {}))
    assert refused.value.status == 400
    assert gateway.stats.snapshot()["errors"]["400"] == errors + 1 and requests_by_mode(gateway) == before  # nothing routed or decoded


def test_a_streams_parts_join_to_its_whole_answer(gateway):
    async def parts():
        reply = await gateway.answer(call(stream=True, max_tokens=12), {})
        return reply.headers, [p async for p in reply.parts]

    headers, got = run(gateway, parts)
    *deltas, last = got
    assert isinstance(last, Finished) and all(isinstance(p, TextDelta) for p in deltas)
    assert "".join(p.text for p in deltas) == last.answer.content and last.answer.tandem["mode"] == headers["x-tandem-mode"]


def test_serve_renders_the_answer_as_openais_body_with_the_decision_in_headers(gateway):
    response = run(gateway, lambda: gateway.serve(call(), {}))
    body = json.loads(response.body)
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert response.headers["x-tandem-mode"] == body["tandem"]["mode"]
