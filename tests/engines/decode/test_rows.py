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
