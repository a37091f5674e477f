"""Per-request decode state (engines.decode.rows.Row): every mode appends tokens through `extend`, so stop
tokens, stop strings and max_new_tokens end an answer alike; streamed text holds back what may yet
become a stop string; `retire` closes the rows that are done. Tokens here are characters (a real
decode function, one character per id), so the text is easy to read."""

from __future__ import annotations

from engines.decode.rows import Row, retire
from engines.types import GenerationRequest

STOP = 0  # the stop token's id


def text_of(ids: list[int]) -> str:
    return "".join(map(chr, ids))


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def row(max_new_tokens: int = 50, stop: list[str] = (), on_text=None, on_done=None) -> Row:
    request = GenerationRequest(prompt="x", max_new_tokens=max_new_tokens, stop=list(stop))
    return Row(request, [1, 2, 3], frozenset({STOP}), None, text_of, on_text=on_text, on_done=on_done)


def test_a_stop_token_ends_the_answer_and_is_not_part_of_it():
    r = row()
    assert r.extend(ids("Hi") + [STOP] + ids("more")) == 3  # the stop token is taken, nothing after it
    assert (r.text, r.finish_reason, r.output) == ("Hi", "stop", ids("Hi"))


def test_max_new_tokens_cuts_the_answer_with_length():
    r = row(max_new_tokens=4)
    assert r.extend(ids("abcdef")) == 4 and (r.text, r.finish_reason) == ("abcd", "length")
    result = r.result()
    assert result.finish_reason == "length" and result.stats.output_tokens == 4 and result.stats.prompt_tokens == 3


def test_a_stop_string_cuts_the_text_and_streaming_holds_back_what_may_become_one():
    sent = []
    r = row(stop=["END"], on_text=sent.append)
    r.extend(ids("Hello E"))
    assert "".join(sent) == "Hello " and not r.finished  # "E" may start "END": held back
    r.extend(ids("N"))
    assert "".join(sent) == "Hello "
    r.extend(ids("D and after"))
    assert r.text == "Hello " and r.finish_reason == "stop" and "".join(sent) == "Hello "
    other = row(stop=["END"], on_text=sent.append)
    other.extend(ids("EX"))  # it was not the stop string after all: sent once it cannot be
    assert sent[-1] == "EX"


def test_retire_keeps_the_rows_still_decoding_and_closes_the_others_once():
    closed = []
    rows = [row(max_new_tokens=2, on_done=closed.append), row(on_done=closed.append), row(on_done=closed.append)]
    rows[2].cancelled = True  # its client went away: its tokens are not taken
    assert retire(rows, [ids("ab"), ids("cd"), ids("ef")]) == [1]
    assert closed == [rows[0], rows[2]] and rows[2].finish_reason == "cancelled" and rows[2].output == []
    assert rows[0].stats.latency_s > 0 and rows[1].text == "cd"


# ---- stop strings under a grammar: never inside the constrained span ----------------------------------

SCHEMA_GRAMMAR = '{"grammars": [{"json_schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}]}'
PING = [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}]


def constrained_row(engine, grammar: str, stop: list[str], opener: str | None = None, on_text=None) -> Row:
    request = GenerationRequest(prompt="x", max_new_tokens=64, stop=stop, grammar=grammar, constrained_opener=opener)
    return engine.row(request, [1, 2, 3], on_text=on_text)


def feed(engine, r: Row, text: str) -> None:
    for t in engine.tokenizer.encode(text, add_special_tokens=False):
        if r.finished:
            break
        r.extend([t])


def auto_tools_spec():
    from types import SimpleNamespace

    from router.gateway.structured import output_spec

    return output_spec(SimpleNamespace(tools=PING, tool_choice="auto", parallel_tool_calls=None, response_format=None))


def test_a_stop_string_never_cuts_a_json_answer(engine):
    for stop in ['"', ":", "}", ", "]:
        sent = []
        r = constrained_row(engine, SCHEMA_GRAMMAR, [stop], on_text=sent.append)
        feed(engine, r, '{"a": "b, c"}')
        assert (r.text, r.finish_reason, "".join(sent)) == ('{"a": "b, c"}', "stop", '{"a": "b, c"}'), stop


def test_under_tool_choice_auto_a_stop_string_ends_a_text_answer_but_never_a_call(engine):
    spec = auto_tools_spec()
    assert spec.constrained_opener == "<tool_call>"
    call = '<tool_call>{"name": "ping", "arguments": {"to": "a, b"}}</tool_call>'
    for stop in ['"', ":", "}", ", "]:
        r = constrained_row(engine, spec.grammar, [stop], spec.constrained_opener)
        feed(engine, r, call)
        assert r.text == call, stop
    text = constrained_row(engine, spec.grammar, [", "], spec.constrained_opener)
    feed(engine, text, "Hello, world")
    assert (text.text, text.finish_reason) == ("Hello", "stop")
