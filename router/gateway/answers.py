"""A decoded answer in OpenAI's shapes: the whole response body, or the chunks of a stream.

Chat answers are read back by `router.gateway.tool_calls`: an answer that calls tools becomes
`message.tool_calls` (content null, finish_reason "tool_calls"); streamed, a call's index, id
and name come first, then its argument fragments, so the fragments join to the whole call.
"""

from __future__ import annotations

from engines.types import GenerationResult
from router.gateway.calls import Call
from router.gateway.openai_api import (assistant_message, chat_chunk, chat_logprobs, chat_response, completion_chunk, completion_logprobs,
                               completion_response, usage)
from router.gateway.tool_calls import read_answer


def result_usage(result: GenerationResult) -> dict:
    return usage(result.stats.prompt_tokens, result.stats.output_tokens)


def whole_answer(call: Call, result: GenerationResult, tandem: dict) -> dict:
    """The response body of a non-streamed request."""
    if not call.chat:
        return completion_response(call.request_id, call.model, result.text, result.finish_reason, result_usage(result), tandem,
                                   completion_logprobs(result.logprobs))
    content, calls = read_answer(result.text, bool(call.output.callable))
    finish = "tool_calls" if calls and result.finish_reason == "stop" else result.finish_reason
    message = assistant_message(content, [c.openai() for c in calls])
    return chat_response(call.request_id, call.model, message, finish, result_usage(result), tandem, chat_logprobs(result.logprobs))


def delta_chunks(call: Call, created: int, events: list[tuple]) -> list[str]:
    """`CallReader` events (or ("content", text) for a text completion) as SSE chunks."""
    out, rid, model = [], call.request_id, call.model
    for event in events:
        if not call.chat:
            out.append(completion_chunk(rid, model, created, event[1]))
        elif event[0] == "content":
            out.append(chat_chunk(rid, model, created, delta={"content": event[1]}))
        elif event[0] == "call":
            c = event[1]
            out.append(chat_chunk(rid, model, created, delta={"tool_calls": [
                {"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]}))
        else:
            out.append(chat_chunk(rid, model, created, delta={"tool_calls": [{"index": event[1], "function": {"arguments": event[2]}}]}))
    return out


def closing_chunks(call: Call, created: int, finish_reason: str, result: GenerationResult, tandem: dict) -> list[str]:
    """The finish_reason chunk (with the `tandem` object, and every token's logprobs when asked:
    clients join chunks' logprobs, so one list at the end reads the same), then usage when asked."""
    rid, model = call.request_id, call.model
    if call.chat:
        out = [chat_chunk(rid, model, created, delta={}, finish_reason=finish_reason, tandem=tandem, logprobs=chat_logprobs(result.logprobs))]
    else:
        out = [completion_chunk(rid, model, created, "", finish_reason=finish_reason, tandem=tandem,
                                logprobs=completion_logprobs(result.logprobs))]
    if call.include_usage:
        u = result_usage(result)
        out.append(chat_chunk(rid, model, created, delta={}, usage_=u) if call.chat else completion_chunk(rid, model, created, "", usage_=u))
    return out
