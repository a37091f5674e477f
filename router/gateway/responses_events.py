"""A streamed answer as the Responses API's server-sent events.

`ResponseEvents` reads the typed parts of the gateway's stream (router.gateway.answer_parts: text
deltas; a tool call's index, id and name, then its argument fragments; then `Finished`, with the
finish_reason, usage and `tandem`, or `Failed`) and writes OpenAI's events in OpenAI's order, each
numbered by `sequence_number`:

    response.created, response.in_progress,
    per output item: response.output_item.added,
      message:       response.content_part.added, response.output_text.delta..., response.output_text.done,
                     response.content_part.done
      function_call: response.function_call_arguments.delta..., response.function_call_arguments.done
    response.output_item.done,
    then response.completed (response.incomplete when the token budget ran out,
    response.failed for a `Failed` part or a stream that ended unfinished).

Items are closed in order: text, then calls one after another.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from engines.errors import TandemError
from router.gateway.answer_parts import Answer, CallArguments, CallStarted, Failed, Finished, Part, TextDelta
from router.gateway.responses_answers import function_call_item, message_item, new_item_id, response_object, response_usage
from router.gateway.responses_api import ResponsesRequest

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# Tandem's error type -> a code OpenAI's ResponseError allows (anything else: server_error)
ERROR_CODES = {"rate_limit_error": "rate_limit_exceeded", "invalid_request_error": "invalid_prompt"}


def encode(event: dict) -> str:
    """One event as SSE: `event: <type>`, `data: <json>`."""
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _error(error: TandemError) -> dict:
    """A Tandem error as a response's `error`."""
    return {"code": ERROR_CODES.get(error.type, "server_error"), "message": error.message or "the stream failed"}


class ResponseEvents:
    """Stream parts in, Responses events (dicts; `encode` makes them SSE) out: `start()`, then
    `feed(part)` per part, then `finish()` when the stream ends.
    `response` is the final response object once a terminal event was made."""

    def __init__(self, req: ResponsesRequest, response_id: str, created_at: int | None = None):
        self.req, self.response_id = req, response_id
        self.created_at = created_at if created_at is not None else int(time.time())
        self.output: list[dict] = []  # items done
        self.response: dict | None = None
        self._seq = 0
        self._open: dict | None = None  # the item being streamed
        self._calls: dict[int, dict] = {}  # tool-call index -> its function_call item
        self._answer: Answer | None = None  # the whole answer, once `Finished` came

    # ---- the events --------------------------------------------------------------------------------

    def _event(self, type_: str, **fields) -> dict:
        event = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _response(self, status: str, error: dict | None = None) -> dict:
        answer = self._answer if status != "in_progress" else None
        return response_object(self.req, self.response_id, self.created_at, self.req.model, list(self.output), status,
                               response_usage(answer), answer.tandem if answer else None, error)

    def start(self) -> list[dict]:
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def feed(self, part: Part) -> list[dict]:
        if self.response is not None:
            return []
        if isinstance(part, Failed):
            return self._fail(_error(part.error))
        if isinstance(part, Finished):
            self._answer = part.answer
            return []
        if isinstance(part, TextDelta):
            return self._text(part.text) if part.text else []
        if isinstance(part, CallStarted):
            return self._start_call(part)
        return self._arguments(part)

    def finish(self) -> list[dict]:
        """The stream ended: close the open item, then the terminal event."""
        if self.response is not None:
            return []
        if self._answer is None:
            return self._fail({"code": "server_error", "message": "the stream ended before the answer finished"})
        status = "incomplete" if self._answer.finish_reason == "length" else "completed"
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

    def _start_call(self, part: CallStarted) -> list[dict]:
        events, call = self._close("completed"), part.call
        self._open = function_call_item(new_item_id("fc"), call.id, call.name, "", status="in_progress")
        self._calls[call.index] = self._open
        return events + [self._event("response.output_item.added", output_index=len(self.output), item=dict(self._open))]

    def _arguments(self, part: CallArguments) -> list[dict]:
        item = self._calls.get(part.index)
        if item is None or item is not self._open or not part.fragment:
            return []
        item["arguments"] += part.fragment
        return [self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=len(self.output),
                            delta=part.fragment)]

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


async def translate_stream(parts: AsyncIterator[Part], events: ResponseEvents,
                           keep: Callable[[dict], Awaitable[bool]] | None = None) -> AsyncIterator[str]:
    """The gateway's stream parts -> the Responses SSE stream (`encode`d events). Closing this (a
    client gone) closes `parts` at once, so the gateway frees the engine's slot. `keep(response)`
    stores a finished response before its terminal event is sent, so that event's `store` says
    whether it was stored (a later previous_response_id can find it) or not."""
    for event in events.start():
        yield encode(event)
    try:
        async for part in parts:
            for event in events.feed(part):
                yield encode(event)
    finally:
        await parts.aclose()
    final = events.finish()
    if final and keep is not None and events.response is not None and events.response["status"] != "failed":
        events.response["store"] = await keep(events.response)  # the terminal event holds this very object
    for event in final:
        yield encode(event)
