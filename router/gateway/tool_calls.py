"""Reading tool calls back out of an answer, whole or as it streams.

The grammar (`router.gateway.structured`) makes a calling answer exactly
`<tool_call>{"name": "NAME", "arguments": ARGS}</tool_call>` per call. `CallReader` reads that
incrementally and yields the stream's typed parts (router.gateway.answer_parts): a call's index, id
and name as soon as the name is complete (`CallStarted`), then its arguments in fragments as they
arrive (`CallArguments`); anything else is `TextDelta`. Reading a whole answer is the
same reader fed once, so streamed argument fragments always join to the non-streamed call.

An answer that does not start with `<tool_call>` is content, passed through unchanged.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from router.gateway.answer_parts import CallArguments, CallStarted, TextDelta, ToolCall
from router.gateway.structured import CALL_CLOSE, CALL_OPEN

_NAME_HEAD = CALL_OPEN + '{"name": '
_ARGS_HEAD = ', "arguments": '
_TAIL = "}" + CALL_CLOSE


def call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class _JsonEnd:
    """Finds where one JSON value (an object) ends in text fed piece by piece."""

    depth: int = 0
    in_string: bool = False
    escaped: bool = False
    started: bool = False

    def feed(self, text: str) -> int:
        """Characters of `text` up to and including the value's last; -1 if it has not ended."""
        for i, ch in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
            elif ch == '"':
                self.in_string = True
            elif ch in "{[":
                self.depth += 1
                self.started = True
            elif ch in "}]":
                self.depth -= 1
                if self.started and self.depth == 0:
                    return i + 1
        return -1


@dataclass
class CallReader:
    """Feed answer text; get `TextDelta`s, a `CallStarted` when a call's name is known, `CallArguments`
    as its arguments arrive. `calls` holds the calls read so far."""

    tools_allowed: bool  # False: everything is content
    calls: list[ToolCall] = field(default_factory=list)
    content: str = ""
    _mode: str = "undecided"  # undecided | content | calls
    _buffer: str = ""  # text not yet turned into events
    _json: _JsonEnd | None = None  # reading a call's arguments
    _closing: bool = False  # a call's arguments ended; its closing literal comes next

    def feed(self, text: str) -> list[TextDelta | CallStarted | CallArguments]:
        events: list[TextDelta | CallStarted | CallArguments] = []
        if self._mode == "content":
            self.content += text
            return [TextDelta(text)] if text else []
        self._buffer += text
        if self._mode == "undecided":
            if not self.tools_allowed or not (CALL_OPEN.startswith(self._buffer[: len(CALL_OPEN)]) or self._buffer.startswith(CALL_OPEN)):
                self._mode, pending, self._buffer = "content", self._buffer, ""
                return self.feed(pending)
            if len(self._buffer) < len(CALL_OPEN):
                return events
            self._mode = "calls"
        while True:
            if self._json is None:  # between calls: waiting for the next call's name
                if self._closing:
                    if len(self._buffer) < len(_TAIL) and _TAIL.startswith(self._buffer):
                        return events
                    self._buffer = self._buffer.removeprefix(_TAIL)
                    self._closing = False
                stripped = self._buffer.lstrip()
                if not stripped.startswith(_NAME_HEAD):
                    return events
                name_end = stripped.find(_ARGS_HEAD, len(_NAME_HEAD))
                if name_end < 0:
                    return events
                try:
                    name = json.loads(stripped[len(_NAME_HEAD) : name_end])
                except json.JSONDecodeError:
                    return events
                call = ToolCall(len(self.calls), call_id(), name)
                self.calls.append(call)
                events.append(CallStarted(call))
                self._buffer, self._json = stripped[name_end + len(_ARGS_HEAD) :], _JsonEnd()
            call = self.calls[-1]
            end = self._json.feed(self._buffer)
            if end < 0:
                fragment, self._buffer = self._buffer, ""
                call.arguments += fragment
                if fragment:
                    events.append(CallArguments(call.index, fragment))
                return events
            fragment, rest = self._buffer[:end], self._buffer[end:]
            call.arguments += fragment
            call.complete = True
            if fragment:
                events.append(CallArguments(call.index, fragment))
            self._json, self._buffer, self._closing = None, rest, True

    def finish(self) -> list[TextDelta | CallStarted | CallArguments]:
        """The answer ended: text still held back (a start that might have become a call) is content."""
        if self._mode == "undecided" and self._buffer:
            self._mode, pending, self._buffer = "content", self._buffer, ""
            return self.feed(pending)
        return []

    @property
    def calling(self) -> bool:
        return self._mode == "calls"


def read_answer(text: str, tools_allowed: bool) -> tuple[str | None, list[ToolCall]]:
    """A whole answer -> (content, complete tool calls). Content is None when the answer calls tools."""
    reader = CallReader(tools_allowed)
    reader.feed(text)
    reader.finish()
    if reader.calling:
        calls = [c for c in reader.calls if c.complete]
        return (None, calls) if calls else (text, [])
    return text, []
