"""The typed hand-offs after routing (router/gateway/outcome.py): an `Attempt` says where a request
was answered (its headers), and `Outcome.of` reads one answered request once: latency from arrival,
the dispatch estimate, tokens per forward, verified's acceptance (verified's alone), as the same
JSON fields for the feed and the decisions log."""

from __future__ import annotations

import json
import time

import pytest

from engines.types import DecodeStats, GenerationRequest, GenerationResult
from router.decision.engine_view import Ticket
from router.decision.types import Decision
from router.gateway.outcome import Attempt, Outcome


def attempt_of(mode: str, routed: str, estimate_ms: float | None = 87.66, ago_s: float = 0.2) -> Attempt:
    decision = Decision(mode=routed, canvas=None, steps=None, reason="test", rule="task_default", task="plan", predicted_tokens=8,
                        confidence=0.8, policy_version=2)
    return Attempt(decision=decision, request=GenerationRequest(prompt="x", mode=mode), mode=mode, degraded=mode != routed,
                   ticket=Ticket(engine="ar", started=time.monotonic(), estimate_ms=estimate_ms), started=time.perf_counter() - ago_s,
                   timeout_s=5.0)


def result_of(mode: str, drafted: int = 0, accepted: int = 0) -> GenerationResult:
    stats = DecodeStats(prompt_tokens=9, output_tokens=10, encoder_calls=6, drafted=drafted, accepted=accepted, ar_tokens=2, looked_up=1)
    return GenerationResult(request_id="r", mode=mode, text="x", token_ids=list(range(10)), finish_reason="length", stats=stats)


def test_an_attempts_headers_say_where_it_was_answered():
    assert attempt_of("ar", "ar").headers() == {"x-tandem-mode": "ar"}
    assert attempt_of("ar", "block").headers() == {"x-tandem-mode": "ar", "x-tandem-degraded": "true"}


def test_an_outcome_reads_the_answer_once():
    outcome = Outcome.of(attempt_of("verified", "verified"), result_of("verified", drafted=8, accepted=6), stream=True)
    assert outcome.latency_ms >= 200 and outcome.estimate_ms == 87.7 and outcome.stream and not outcome.degraded
    assert (outcome.output_tokens, outcome.finish_reason, outcome.tokens_per_forward) == (10, "length", 2.0)  # 10 tokens / 5 calls after prefill
    assert (outcome.drafted, outcome.accepted, outcome.acceptance, outcome.ar_tokens, outcome.looked_up) == (8, 6, 0.75, 2, 1)
    assert outcome.shadow_agreement is None  # known only off the request path (router.gateway.records)


@pytest.mark.parametrize("mode", ["ar", "block"])
def test_acceptance_is_verifieds_alone_and_no_estimate_stays_none(mode):
    outcome = Outcome.of(attempt_of(mode, "verified", estimate_ms=None), result_of(mode), stream=False)
    assert outcome.acceptance is None and outcome.estimate_ms is None and outcome.degraded and outcome.mode == mode


def test_its_record_is_json_with_every_field():
    outcome = Outcome.of(attempt_of("ar", "ar"), result_of("ar"), stream=False)
    record = outcome.record()
    assert json.loads(json.dumps(record)) == record and Outcome(**record) == outcome
