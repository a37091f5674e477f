"""Records (router/gateway/records.py): one answered request's `Outcome` is built once and reaches
/admin/stats, the console's feed, the metrics and the Redis decisions log with the same numbers;
errors are counted the same way; a block answer under shadow verification is checked by a real
engine (the shipped tiny model, in process) off the request path, and its agreement is logged.
Real parts throughout: GatewayStats, DecisionFeed, Telemetry, a real Redis stream."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engines.types import DecodeStats, GenerationRequest, GenerationResult
from router.decision.engine_view import Ticket
from router.decision.types import Decision
from router.gateway.calls import chat_call
from router.gateway.decision_feed import DecisionFeed
from router.gateway.decisions_log import DecisionsLogSettings
from router.gateway.openai_api import ChatCompletionRequest
from router.gateway.outcome import Attempt
from router.gateway.records import Records
from router.gateway.structured import output_spec
from router.gateway.telemetry import GatewayStats, Telemetry
from tests.policies.helpers import redis_client

ASK = [{"role": "user", "content": "Extract the name as JSON: Alice Smith lives in Paris."}]


def call_of(stream: bool = False):
    req = ChatCompletionRequest.model_validate({"model": "tandem", "messages": ASK, "max_tokens": 16, "stream": stream})
    call = chat_call(req, {}, output_spec(req))
    call.request_id = "chatcmpl-records"
    return call


def decision_of(mode: str = "verified", shadow: bool = False) -> Decision:
    return Decision(mode=mode, canvas=32, steps=8, reason="test", rule="task_default", trace=[f"task_default:{mode}"], task="extract",
                    predicted_tokens=16, confidence=0.9, policy_version=7, shadow_verify=shadow, request_id="chatcmpl-records")


def attempt_of(decision: Decision, request: GenerationRequest | None = None, ago_s: float = 0.05) -> Attempt:
    return Attempt(decision=decision, request=request or GenerationRequest(messages=ASK, mode=decision.mode), mode=decision.mode,
                   degraded=False, ticket=Ticket(engine="block", started=time.monotonic(), mode=decision.mode, estimate_ms=123.44),
                   started=time.perf_counter() - ago_s, timeout_s=30.0)


def result_of(mode: str = "verified") -> GenerationResult:
    stats = DecodeStats(prompt_tokens=20, output_tokens=12, encoder_calls=3, decoder_calls=6, steps_per_canvas=[6], drafted=10, accepted=8)
    return GenerationResult(request_id="chatcmpl-records", mode=mode, text='{"name": "Alice Smith"}', token_ids=list(range(12)),
                            finish_reason="stop", stats=stats)


def records_of(redis=None, shadow_engine=None, stream: str = "tandem:test:decisions") -> Records:
    return Records(GatewayStats(), DecisionFeed(), Telemetry("none"), redis, DecisionsLogSettings(), stream, shadow_engine, timeout_s=30.0)


async def settled(records: Records) -> None:
    """Wait for the work records left off the request path (shadow checks, log writes)."""
    await asyncio.gather(*records._background)


def requests_counted(records: Records, **labels: str) -> float:
    """The tandem.requests counter in the Prometheus text, over the samples with `labels`."""
    families = text_string_to_metric_families(records.telemetry.prometheus_text().decode())
    return sum(s.value for f in families for s in f.samples
               if s.name == "tandem_requests_total" and labels.items() <= s.labels.items())


def logged_outcomes(client, stream: str) -> list[dict]:
    return [json.loads(fields["outcome"]) for _, fields in client.xrange(stream)]


def test_one_outcome_reaches_stats_feed_metrics_and_the_log_alike(prefix):
    client = redis_client()
    records = records_of(client, stream=f"{prefix}decisions")
    attempt, result = attempt_of(decision_of("verified")), result_of("verified")

    async def answer():
        records.answered(call_of(), attempt, result)
        await settled(records)

    asyncio.run(answer())
    [entry] = records.feed.after(0)
    assert (entry["status"], entry["mode"], entry["routed_mode"], entry["policy_version"], entry["stream"]) == (200, "verified", "verified", 7, False)
    assert entry["latency_ms"] >= 50 and entry["estimate_ms"] == 123.4 and entry["output_tokens"] == 12
    assert (entry["drafted"], entry["accepted"], entry["acceptance"], entry["tokens_per_forward"]) == (10, 8, 0.8, 1.5)  # 12 tokens / 8 calls after the prefill
    stats = records.stats.snapshot()
    assert stats["modes"]["verified"]["requests"] == 1 and stats["modes"]["verified"]["latency_ms_p50"] == entry["latency_ms"]
    assert stats["acceptance_rate"] == 0.8 and stats["errors"] == {}
    assert requests_counted(records, mode="verified", rule="task_default", status="200", task="extract") == 1
    [logged] = logged_outcomes(client, f"{prefix}decisions")
    assert logged == {k: v for k, v in entry.items() if k in logged} and logged["latency_ms"] == entry["latency_ms"]  # the same Outcome
    client.close()


def test_without_redis_or_shadow_nothing_runs_off_the_request_path():
    records = records_of()
    records.answered(call_of(stream=True), attempt_of(decision_of("ar")), result_of("ar"))
    assert not records._background and records.feed.after(0)[0]["stream"] is True
    assert records.feed.after(0)[0]["acceptance"] is None  # acceptance is verified's alone


def test_errors_are_counted_and_fed_once_routed():
    records = records_of()
    records.error(400, code="invalid_value")  # refused before routing: no decision, nothing in the feed
    records.error(503, code="engine_unavailable", decision=decision_of("block"), mode="ar")
    assert records.stats.snapshot()["errors"] == {"400": 1, "503": 1}
    assert [(e["status"], e["error"], e["mode"], e["routed_mode"]) for e in records.feed.after(0)] == [(503, "engine_unavailable", "ar", "block")]
    assert requests_counted(records, status="400") == requests_counted(records, status="503") == 1


@pytest.fixture(scope="module")
def engine():
    from engines.replica.deployment import EngineDeployment
    from engines.types import MODES
    from tests.router.local_engines import LocalEngine

    return LocalEngine(EngineDeployment(modes=MODES, max_wait_s=0.001))


def test_a_shadow_verified_block_answer_logs_how_much_of_it_ar_accepts(engine, prefix):
    """A block answer equal to AR's greedy answer is accepted whole: agreement 1.0. The same tokens
    less the last, ended on a stop token where AR goes on, are not AR's answer: the stop is checked
    too, and the agreement is under 1.0 (a block answer that stopped early used to count as AR's)."""
    client = redis_client()
    records = records_of(client, shadow_engine=engine, stream=f"{prefix}decisions")
    request = GenerationRequest(messages=ASK, mode="ar", max_new_tokens=8)
    eos = min(engine.deployment.engine.eos_ids)

    async def answer():
        result = await engine.generate(request)
        assert result.finish_reason == "length"  # AR goes on after its 8th token (no stop there)
        as_block = dataclasses.replace(result, mode="block")  # what a block answer equal to AR's would hand back
        stopped_early = dataclasses.replace(result, mode="block", token_ids=result.token_ids[:-1], stop_token=eos)
        for block in (as_block, stopped_early):
            records.answered(call_of(), attempt_of(decision_of("block", shadow=True), request), block)
            await settled(records)
        return result

    n = len(asyncio.run(answer()).token_ids)
    whole, stopped = logged_outcomes(client, f"{prefix}decisions")
    assert whole["mode"] == "block" and whole["shadow_agreement"] == 1.0
    assert stopped["shadow_agreement"] == round((n - 1) / n, 4)  # its n - 1 tokens accepted, its stop not
    client.close()
