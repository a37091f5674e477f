"""A streamed chat completion as the Responses API's server-sent events.

`ResponseEvents` reads the chat chunks the gateway streams (`router.gateway.answers.chat_chunk`: role,
content deltas; a tool call's index, id and name, then its argument fragments; a closing chunk with
finish_reason and `tandem`; a usage-only chunk; or an in-band `{"error": ...}`) and writes OpenAI's
events in OpenAI's order, each numbered by `sequence_number`:

    response.created, response.in_progress,
    per output item: response.output_item.added,
      message:       response.content_part.added, response.output_text.delta..., response.output_text.done,
                     response.content_part.done
      function_call: response.function_call_arguments.delta..., response.function_call_arguments.done
    response.output_item.done,
    then response.completed (response.incomplete when the token budget ran out,
    response.failed for an error chunk or a stream that ended unfinished).

Items are closed in order: text, then calls one after another. The terminal event waits for the
end of the chat stream, since usage comes after finish_reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterable, AsyncIterator

from router.gateway.responses_answers import function_call_item, message_item, new_item_id, response_object, response_usage
from router.gateway.responses_api import ResponsesRequest

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Tandem's error type -> a code OpenAI's ResponseError allows (anything else: server_error)
ERROR_CODES = {"rate_limit_error": "rate_limit_exceeded", "invalid_request_error": "invalid_prompt"}


def encode(event: dict) -> str:
    """One event as SSE: `event: <type>`, `data: <json>`."""
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


def chat_chunks(sse_text: str) -> list[dict]:
    """The JSON payloads of whole SSE events (`data: ...` lines); `[DONE]` is skipped."""
    out = []
    for line in sse_text.splitlines():
        if line.startswith("data:") and (data := line[5:].strip()) and data != "[DONE]":
            out.append(json.loads(data))
    return out


def _error(body: dict) -> dict:
    """A chat error body ({message, type, param, code}) as a response's `error`."""
    return {"code": ERROR_CODES.get(body.get("type") or "", "server_error"), "message": str(body.get("message") or "the chat stream failed")}


class ResponseEvents:
    """Chat completion chunks in, Responses events (dicts; `encode` makes them SSE) out:
    `start()`, then `feed(chunk)` per chunk, then `finish()` when the chat stream ends.
    `response` is the final response object once a terminal event was made."""

    def __init__(self, req: ResponsesRequest, response_id: str, created_at: int | None = None):
        self.req, self.response_id = req, response_id
        self.created_at = created_at if created_at is not None else int(time.time())
        self.output: list[dict] = []  # items done
        self.response: dict | None = None
        self._seq = 0
        self._open: dict | None = None  # the item being streamed
        self._calls: dict[int, dict] = {}  # chat tool-call index -> its function_call item
        self._finish_reason: str | None = None
        self._usage: dict | None = None
        self._tandem: dict | None = None

    # ---- the events --------------------------------------------------------------------------------

    def _event(self, type_: str, **fields) -> dict:
        event = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _response(self, status: str, error: dict | None = None) -> dict:
        return response_object(self.req, self.response_id, self.created_at, self.req.model, list(self.output), status,
                               response_usage(self._usage) if status != "in_progress" else None, self._tandem, error)

    def start(self) -> list[dict]:
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def feed(self, chunk: dict) -> list[dict]:
        if self.response is not None:
            return []
        if "error" in chunk:
            return self._fail(_error(chunk["error"]))
        self._usage = chunk.get("usage") or self._usage
        self._tandem = chunk.get("tandem") or self._tandem
        events: list[dict] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                events += self._call(call)
            self._finish_reason = choice.get("finish_reason") or self._finish_reason
        return events

    def finish(self) -> list[dict]:
        """The chat stream ended: close the open item, then the terminal event."""
        if self.response is not None:
            return []
        if self._finish_reason is None:
            return self._fail({"code": "server_error", "message": "the chat stream ended before the answer finished"})
        status = "incomplete" if self._finish_reason == "length" else "completed"
        events = [] if self.output or self._open else self._text("")  # an empty answer is an empty message, as unstreamed
        events += self._close(status)
        self.response = self._response(status)
        return events + [self._event(f"response.{status}", response=self.response)]

    def _fail(self, error: dict) -> list[dict]:
        self.response = self._response("failed", error)
        return [self._event("response.failed", response=self.response)]

    # ---- items ---------------------------------------------------------------------------------------

    def _text(self, text: str) -> list[dict]:
        events = []
        if self._open is None or self._open["type"] != "message":
            events += self._close("completed")
            self._open = message_item(new_item_id("msg"), "", status="in_progress")
            events.append(self._event("response.output_item.added", output_index=len(self.output), item=_started(self._open)))
            events.append(self._part_event("response.content_part.added", {"type": "output_text", "text": "", "annotations": []}))
        if text:
            self._open["content"][0]["text"] += text
            events.append(self._event("response.output_text.delta", item_id=self._open["id"], output_index=len(self.output),
                                      content_index=0, delta=text, logprobs=[]))
        return events

    def _call(self, delta: dict) -> list[dict]:
        events, fn = [], delta.get("function") or {}
        if delta.get("id"):  # a new call: its id and name come first
            events += self._close("completed")
            self._open = function_call_item(new_item_id("fc"), delta["id"], fn.get("name", ""), "", status="in_progress")
            self._calls[delta.get("index", len(self._calls))] = self._open
            events.append(self._event("response.output_item.added", output_index=len(self.output), item=dict(self._open)))
        item = self._calls.get(delta.get("index", len(self._calls) - 1))
        if item is not None and item is self._open and fn.get("arguments"):
            item["arguments"] += fn["arguments"]
            events.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=len(self.output),
                                      delta=fn["arguments"]))
        return events

    def _part_event(self, type_: str, part: dict) -> dict:
        return self._event(type_, item_id=self._open["id"], output_index=len(self.output), content_index=0, part=part)

    def _close(self, status: str) -> list[dict]:
        """Done events for the open item (if any); it joins `output` with `status`."""
        item, events = self._open, []
        if item is None:
            return events
        index = len(self.output)
        if item["type"] == "message":
            part = item["content"][0]
            events.append(self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                                      text=part["text"], logprobs=[]))
            events.append(self._part_event("response.content_part.done", dict(part)))
        else:
            events.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                      arguments=item["arguments"]))
        item["status"] = status
        self.output.append(item)
        self._open = None
        return events + [self._event("response.output_item.done", output_index=index, item=json.loads(json.dumps(item)))]


def _started(item: dict) -> dict:
    """A message as output_item.added shows it: no content yet."""
    return item | {"content": []}


async def translate_stream(chat_sse: AsyncIterable[str | bytes], events: ResponseEvents) -> AsyncIterator[str]:
    """The gateway's chat SSE stream -> the Responses SSE stream (`encode`d events). Closing this
    (a client gone) closes `chat_sse` at once, so the gateway frees the engine's slot."""
    for event in events.start():
        yield encode(event)
    buffer = ""
    try:
        async for piece in chat_sse:
            buffer += piece.decode() if isinstance(piece, bytes) else piece
            whole, sep, buffer = buffer.rpartition("\n\n")
            for chunk in chat_chunks(whole + sep):
                for event in events.feed(chunk):
                    yield encode(event)
    finally:
        if (close := getattr(chat_sse, "aclose", None)) is not None:
            await close()
    for chunk in chat_chunks(buffer):
        for event in events.feed(chunk):
            yield encode(event)
    for event in events.finish():
        yield encode(event)
