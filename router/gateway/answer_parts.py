"""The typed answer every wire format renders from: a whole `Answer`, or a stream of parts ending in
`Finished` or `Failed`, as the replies (`router.gateway.replies`) make them from what failover hands
back. OpenAI's chat and text completions (`router.gateway.answers`) and the Responses API
(`router.gateway.responses_answers`, `router.gateway.responses_events`) each render these; no wire
format is parsed back into another.

A stream's parts come in answer order: `TextDelta`s, or per tool call a `CallStarted` (its index,
id and name, as soon as the name is complete) then its `CallArguments` fragments; then one
`Finished` (with the whole `Answer`) or one `Failed`. A stream that ends with neither ended unfinished.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

from engines.errors import TandemError
from engines.types import GenerationResult
from router.gateway.outcome import Attempt


@dataclasses.dataclass
class ToolCall:
    """One tool call read out of an answer (router.gateway.tool_calls)."""

    index: int  # its place among the answer's calls
    id: str  # call_..., which the tool's result names
    name: str
    arguments: str = ""  # the JSON text, as OpenAI sends it
    complete: bool = False  # its arguments' JSON has ended

    def openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclasses.dataclass(frozen=True)
class Answer:
    """A finished answer, in no wire format yet."""

    content: str | None  # the answer's text; None when it calls tools
    calls: list[ToolCall]  # the tool calls it makes (none for text)
    finish_reason: str  # stop, length, or tool_calls (a stop that called tools)
    prompt_tokens: int
    output_tokens: int
    logprobs: list[dict] | None  # per output token, when asked (engines.types.GenerationResult.logprobs)
    tandem: dict  # how it was routed and served: the body's `tandem` object (`tandem_object`)

    @classmethod
    def of(cls, attempt: Attempt, result: GenerationResult, content: str | None, calls: list[ToolCall]) -> Answer:
        finish = "tool_calls" if calls and result.finish_reason == "stop" else result.finish_reason
        return cls(content=content, calls=calls, finish_reason=finish, prompt_tokens=result.stats.prompt_tokens,
                   output_tokens=result.stats.output_tokens, logprobs=result.logprobs, tandem=tandem_object(attempt, result))


@dataclasses.dataclass(frozen=True)
class TextDelta:
    text: str  # the next piece of the answer's text


@dataclasses.dataclass(frozen=True)
class CallStarted:
    call: ToolCall  # a new call: its index, id and name (its arguments follow as CallArguments)


@dataclasses.dataclass(frozen=True)
class CallArguments:
    index: int  # the call's index
    fragment: str  # the next piece of its arguments' JSON text


@dataclasses.dataclass(frozen=True)
class Finished:
    answer: Answer  # the whole answer; its text and calls were streamed before


@dataclasses.dataclass(frozen=True)
class Failed:
    error: TandemError  # why the stream ended after its first byte (told in-band)


Part = TextDelta | CallStarted | CallArguments | Finished | Failed


@dataclasses.dataclass
class Reply:
    """What the gateway answers a routed request with, before a wire format renders it."""

    headers: dict[str, str]  # the decision and where it was answered (x-tandem-*)
    answer: Answer | None = None  # a whole answer
    parts: AsyncIterator[Part] | None = None  # a stream's parts; closing it frees the engine's slot


def tandem_object(attempt: Attempt, result: GenerationResult) -> dict:
    """The response body's `tandem` object: how the request was routed and served."""
    s, decision, mode = result.stats, attempt.decision, attempt.mode
    return {
        "mode": mode, "routed_mode": decision.mode, "task": decision.task, "reason": decision.reason, "rule": decision.rule,
        "trace": decision.trace, "policy_version": decision.policy_version, "canvas": decision.canvas if mode != "ar" else None,
        "steps": s.steps_per_canvas, "tokens_per_forward": round(s.tokens_per_forward, 3), "forwards": s.forwards,
        "drafted": s.drafted, "accepted_tokens": s.accepted, "looked_up_tokens": s.looked_up, "degraded": attempt.degraded,
        "closed_early": s.closed_early,
    } | ({"slot_tokens_block": s.slot_tokens_block, "slot_tokens_ar": s.slot_tokens_ar} if s.slot_tokens_block is not None else {})
