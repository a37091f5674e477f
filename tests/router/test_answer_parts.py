"""The typed answer (router/gateway/answer_parts.py) every wire format renders from: `Answer.of`
reads a result's finish, usage and logprobs once, and its `tandem` object says how the request was
routed and served, whatever format renders it."""

from __future__ import annotations

import time

import pytest

from engines.types import DecodeStats, GenerationRequest, GenerationResult
from router.decision.engine_view import Ticket
from router.decision.types import Decision
from router.gateway.answer_parts import Answer, ToolCall
from router.gateway.outcome import Attempt

CALLS = [ToolCall(0, "call_1", "get_weather", '{"city": "Paris"}', complete=True)]


def attempt_of(mode: str, routed: str | None = None) -> Attempt:
    routed = routed or mode
    decision = Decision(mode=routed, canvas=32, steps=8, reason="test", rule="task_default", trace=[f"task_default:{routed}"],
                        task="extract", predicted_tokens=16, confidence=0.9, policy_version=4)
    return Attempt(decision=decision, request=GenerationRequest(prompt="x", mode=mode), mode=mode, degraded=mode != routed,
                   ticket=Ticket(engine="block", started=time.monotonic()), started=time.perf_counter(), timeout_s=5.0)


def result_of(mode: str, finish: str = "stop", **stats) -> GenerationResult:
    return GenerationResult(request_id="r", mode=mode, text="x", token_ids=[1, 2, 3], finish_reason=finish,
                            stats=DecodeStats(prompt_tokens=11, output_tokens=3, **stats), logprobs=[{"token": "x", "logprob": -0.1}])


@pytest.mark.parametrize("finish, calls, expected", [("stop", CALLS, "tool_calls"), ("stop", [], "stop"), ("length", CALLS, "length"),
                                                     ("length", [], "length")])
def test_a_stop_that_called_tools_finishes_as_tool_calls(finish, calls, expected):
    answer = Answer.of(attempt_of("ar"), result_of("ar", finish), None if calls else "x", calls)
    assert answer.finish_reason == expected and answer.calls == calls


def test_usage_and_logprobs_come_from_the_result():
    answer = Answer.of(attempt_of("ar"), result_of("ar"), "x", [])
    assert (answer.prompt_tokens, answer.output_tokens, answer.logprobs) == (11, 3, [{"token": "x", "logprob": -0.1}])


def test_the_tandem_object_says_how_it_was_routed_and_served():
    block = Answer.of(attempt_of("block"), result_of("block", steps_per_canvas=[6], encoder_calls=2, decoder_calls=6), "x", []).tandem
    assert (block["mode"], block["routed_mode"], block["canvas"], block["steps"], block["degraded"]) == ("block", "block", 32, [6], False)
    assert (block["task"], block["rule"], block["trace"], block["policy_version"], block["forwards"]) == (
        "extract", "task_default", ["task_default:block"], 4, 8)
    assert "slot_tokens_block" not in block  # only a skeleton-seeded answer says how its slots were written
    failed_over = Answer.of(attempt_of("ar", routed="block"), result_of("ar", slot_tokens_block=5, slot_tokens_ar=1), "x", []).tandem
    assert (failed_over["mode"], failed_over["routed_mode"], failed_over["canvas"], failed_over["degraded"]) == ("ar", "block", None, True)
    assert (failed_over["slot_tokens_block"], failed_over["slot_tokens_ar"]) == (5, 1)
