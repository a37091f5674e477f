"""Reading an answer's tool calls back (router.gateway.tool_calls): whole or streamed, calls join to
the same calls at any cut, and text that only looks like a call's start is content."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from router.gateway.answer_parts import CallArguments, CallStarted, TextDelta
from router.gateway.tool_calls import CallReader, read_answer


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(1, 200), max_size=12), location=st.text(max_size=12))
def test_streamed_calls_join_to_the_whole_answer_at_any_cut(cuts, location):
    text = "".join(f'<tool_call>{{"name": "{n}", "arguments": {json.dumps(a, ensure_ascii=False)}}}</tool_call>'
                   for n, a in [("get_weather", {"location": location, "days": 2}), ("ping", {})])
    _, whole = read_answer(text, True)
    reader, pieces, at = CallReader(True), [], 0
    for cut in sorted({min(c, len(text)) for c in cuts}) + [len(text)]:
        pieces.append(text[at:cut])
        at = cut
    events = [e for p in pieces for e in reader.feed(p)] + reader.finish()
    names = [e.call.name for e in events if isinstance(e, CallStarted)]
    arguments = {}
    for e in events:
        if isinstance(e, CallArguments):
            arguments[e.index] = arguments.get(e.index, "") + e.fragment
    assert names == [c.name for c in whole] and [arguments.get(i, "") for i in range(len(whole))] == [c.arguments for c in whole]
    assert not [e for e in events if isinstance(e, TextDelta)]


def test_text_is_content_whole_and_streamed():
    assert read_answer("<b>bold</b> claim", True) == ("<b>bold</b> claim", [])
    reader = CallReader(True)
    events = reader.feed("<to") + reader.feed("day>") + reader.finish()
    assert all(isinstance(e, TextDelta) for e in events) and "".join(e.text for e in events) == "<today>"


def test_a_calling_answer_is_its_calls_with_ids_of_their_own_and_no_content():
    text = ('<tool_call>{"name": "get_weather", "arguments": {"location": "Oslo"}}</tool_call>'
            '<tool_call>{"name": "ping", "arguments": {}}</tool_call>')
    content, calls = read_answer(text, True)
    assert content is None
    assert [(c.index, c.name, json.loads(c.arguments)) for c in calls] == [(0, "get_weather", {"location": "Oslo"}), (1, "ping", {})]
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith("call_") for c in calls)


def test_without_tools_or_with_a_call_cut_off_the_answer_is_content():
    call = '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'
    assert read_answer(call, False) == (call, [])  # no tools in the request: a call-shaped answer is text
    cut = '<tool_call>{"name": "ping", "arguments": {"a": '
    assert read_answer(cut, True) == (cut, [])  # max_tokens ended it mid-call: no call to return
