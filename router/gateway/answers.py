"""A typed answer (router.gateway.answer_parts) in OpenAI's shapes: the whole response body, or the
chunks of a stream (the OpenAI wire format out; `router.gateway.openai_api` is the wire format in).

The replies (`router.gateway.replies`) read chat answers with `router.gateway.tool_calls`: an answer
that calls tools becomes `message.tool_calls` (content null, finish_reason "tool_calls"); streamed,
a call's index, id and name come first, then its argument fragments, so the fragments join to the
whole call.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator

from engines.errors import TandemError
from router.gateway.answer_parts import Answer, CallArguments, CallStarted, Failed, Finished, Part, TextDelta
from router.gateway.calls import Call

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


def answer_usage(answer: Answer) -> dict:
    return usage(answer.prompt_tokens, answer.output_tokens)


def whole_answer(call: Call, answer: Answer) -> dict:
    """The response body of a non-streamed request: a chat answer's message (its content, or its
    tool calls with content null); a text completion's text."""
    if not call.chat:
        return completion_response(call.request_id, call.model, answer.content, answer.finish_reason, answer_usage(answer),
                                   answer.tandem, completion_logprobs(answer.logprobs))
    message = assistant_message(answer.content, [c.openai() for c in answer.calls])
    return chat_response(call.request_id, call.model, message, answer.finish_reason, answer_usage(answer), answer.tandem,
                         chat_logprobs(answer.logprobs))


async def stream_chunks(call: Call, parts: AsyncIterator[Part]) -> AsyncIterator[str]:
    """A stream's parts as SSE chunks: a chat answer's role first, then [DONE] last (after an
    in-band error too). Closing this (a client gone) closes `parts` at once, so the engine's slot is freed."""
    created = int(time.time())
    try:
        for chunk in opening_chunks(call, created):
            yield chunk
        async for part in parts:
            for chunk in part_chunks(call, created, part):
                yield chunk
    finally:
        await parts.aclose()
    yield DONE


def opening_chunks(call: Call, created: int) -> list[str]:
    """What a stream starts with: a chat answer's role (a text completion has none)."""
    return [chat_chunk(call.request_id, call.model, created, delta={"role": "assistant", "content": ""})] if call.chat else []


def part_chunks(call: Call, created: int, part: Part) -> list[str]:
    """One part as SSE chunks."""
    rid, model = call.request_id, call.model
    if isinstance(part, Finished):
        return closing_chunks(call, created, part.answer)
    if isinstance(part, Failed):
        return [error_event(part.error)]
    if not call.chat:
        return [completion_chunk(rid, model, created, part.text)]
    if isinstance(part, TextDelta):
        return [chat_chunk(rid, model, created, delta={"content": part.text})]
    if isinstance(part, CallStarted):
        c = part.call
        return [chat_chunk(rid, model, created, delta={"tool_calls": [
            {"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}]})]
    assert isinstance(part, CallArguments), f"not a stream part: {part!r}"
    return [chat_chunk(rid, model, created, delta={"tool_calls": [{"index": part.index, "function": {"arguments": part.fragment}}]})]


def closing_chunks(call: Call, created: int, answer: Answer) -> list[str]:
    """The finish_reason chunk (with the `tandem` object, and every token's logprobs when asked:
    clients join chunks' logprobs, so one list at the end reads the same), then usage when asked."""
    rid, model, finish = call.request_id, call.model, answer.finish_reason
    if call.chat:
        out = [chat_chunk(rid, model, created, delta={}, finish_reason=finish, tandem=answer.tandem, logprobs=chat_logprobs(answer.logprobs))]
    else:
        out = [completion_chunk(rid, model, created, "", finish_reason=finish, tandem=answer.tandem,
                                logprobs=completion_logprobs(answer.logprobs))]
    if call.include_usage:
        u = answer_usage(answer)
        out.append(chat_chunk(rid, model, created, delta={}, usage_=u) if call.chat else completion_chunk(rid, model, created, "", usage_=u))
    return out
