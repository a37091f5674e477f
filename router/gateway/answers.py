"""A decoded answer in OpenAI's shapes: the whole response body, or the chunks of a stream (the
OpenAI wire format out; `router.gateway.openai_api` is the wire format in).

Chat answers come here as `router.gateway.tool_calls` reads them (the replies,
`router.gateway.replies`, read them first): an answer that calls tools becomes
`message.tool_calls` (content null, finish_reason "tool_calls"); streamed, a call's index, id
and name come first, then its argument fragments, so the fragments join to the whole call.
"""

from __future__ import annotations

import json
import time
import uuid

from engines.errors import TandemError
from engines.types import GenerationResult
from router.gateway.calls import Call
from router.gateway.outcome import Attempt
from router.gateway.tool_calls import ToolCall

DONE = "data: [DONE]\n\n"  # a stream's last event


def chat_logprobs(entries: list[dict] | None) -> dict | None:
    """Per-token logprobs in the chat shape ({"content": [...]})."""
    return None if entries is None else {"content": entries, "refusal": None}


def completion_logprobs(entries: list[dict] | None) -> dict | None:
    """Per-token logprobs in the legacy completions shape (parallel lists, top as {token: logprob})."""
    if entries is None:
        return None
    offsets, at = [], 0
    for e in entries:
        offsets.append(at)
        at += len(e["token"])
    return {"tokens": [e["token"] for e in entries], "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries], "text_offset": offsets}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def assistant_message(content: str | None, tool_calls: list[dict] | None = None) -> dict:
    """The answer as a chat message: content, or tool calls (content null) as OpenAI writes them."""
    return {"role": "assistant", "content": content} | ({"tool_calls": tool_calls} if tool_calls else {})


def chat_response(rid: str, model: str, message: dict, finish_reason: str, usage_: dict, tandem: dict,
                  logprobs: dict | None = None) -> dict:
    return _response(rid, model, "chat.completion", {"message": message}, finish_reason, usage_, tandem, logprobs)


def completion_response(rid: str, model: str, text: str, finish_reason: str, usage_: dict, tandem: dict,
                        logprobs: dict | None = None) -> dict:
    return _response(rid, model, "text_completion", {"text": text}, finish_reason, usage_, tandem, logprobs)


def _response(rid: str, model: str, obj: str, content: dict, finish_reason: str, usage_: dict, tandem: dict, logprobs: dict | None) -> dict:
    """A whole response body: one choice (`content`: its message or text), usage and the `tandem` object."""
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model,
            "choices": [{"index": 0, **content, "logprobs": logprobs, "finish_reason": finish_reason}], "usage": usage_, "tandem": tandem}


def _chunk(rid: str, model: str, created: int, obj: str, content: dict, finish_reason: str | None,
           usage_: dict | None, tandem: dict | None, logprobs: dict | None = None) -> str:
    """One SSE chunk; a usage-only chunk (OpenAI's include_usage) has no choices."""
    usage_only = usage_ is not None and finish_reason is None and not any(content.values())
    chunk = {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [] if usage_only else [{"index": 0, **content, "logprobs": logprobs, "finish_reason": finish_reason}],
    }
    if usage_ is not None:
        chunk["usage"] = usage_
    if tandem is not None:
        chunk["tandem"] = tandem
    return sse(chunk)


def chat_chunk(rid: str, model: str, created: int, delta: dict, finish_reason: str | None = None, usage_: dict | None = None,
               tandem: dict | None = None, logprobs: dict | None = None) -> str:
    return _chunk(rid, model, created, "chat.completion.chunk", {"delta": delta}, finish_reason, usage_, tandem, logprobs)


def completion_chunk(rid: str, model: str, created: int, text: str, finish_reason: str | None = None, usage_: dict | None = None,
                     tandem: dict | None = None, logprobs: dict | None = None) -> str:
    return _chunk(rid, model, created, "text_completion", {"text": text}, finish_reason, usage_, tandem, logprobs)


def sse(payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


def error_event(error: TandemError) -> str:
    """An error after a stream's first byte: in-band, as OpenAI's error body."""
    return sse(error.body())


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


def result_usage(result: GenerationResult) -> dict:
    return usage(result.stats.prompt_tokens, result.stats.output_tokens)


def whole_answer(call: Call, attempt: Attempt, content: str | None, calls: list[ToolCall]) -> dict:
    """The response body of a non-streamed request: a chat answer as `tool_calls.read_answer` read
    it (`content`, or None when it calls tools, and the complete `calls`); a text completion's text."""
    result, tandem = attempt.result, tandem_object(attempt, attempt.result)
    if not call.chat:
        return completion_response(call.request_id, call.model, result.text, result.finish_reason, result_usage(result), tandem,
                                   completion_logprobs(result.logprobs))
    finish = "tool_calls" if calls and result.finish_reason == "stop" else result.finish_reason
    message = assistant_message(content, [c.openai() for c in calls])
    return chat_response(call.request_id, call.model, message, finish, result_usage(result), tandem, chat_logprobs(result.logprobs))


def opening_chunks(call: Call, created: int) -> list[str]:
    """What a stream starts with: a chat answer's role (a text completion has none)."""
    return [chat_chunk(call.request_id, call.model, created, delta={"role": "assistant", "content": ""})] if call.chat else []


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


def closing_chunks(call: Call, created: int, finish_reason: str, result: GenerationResult, attempt: Attempt) -> list[str]:
    """The finish_reason chunk (with the `tandem` object, and every token's logprobs when asked:
    clients join chunks' logprobs, so one list at the end reads the same), then usage when asked."""
    rid, model, tandem = call.request_id, call.model, tandem_object(attempt, result)
    if call.chat:
        out = [chat_chunk(rid, model, created, delta={}, finish_reason=finish_reason, tandem=tandem, logprobs=chat_logprobs(result.logprobs))]
    else:
        out = [completion_chunk(rid, model, created, "", finish_reason=finish_reason, tandem=tandem,
                                logprobs=completion_logprobs(result.logprobs))]
    if call.include_usage:
        u = result_usage(result)
        out.append(chat_chunk(rid, model, created, delta={}, usage_=u) if call.chat else completion_chunk(rid, model, created, "", usage_=u))
    return out
