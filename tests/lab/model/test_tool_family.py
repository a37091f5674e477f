"""The "tool" task family: OpenAI-style tool calls in the chat template's exact format, JSON with
named keys, its scorer, and how training and evaluation render its `tools`."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from transformers import AutoTokenizer

from engines.defaults import SHIPPED_CHECKPOINT
from lab.model.evaluate import item_prompt
from lab.model.tasks import FAMILIES, SHORT_FAMILIES, generate_suite, parse_tool_calls, sample_item, score, tool_call_text
from lab.model.train import TrainConfig, encode_item, encode_prompt, make_batch


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT, local_files_only=True)


@pytest.fixture(scope="module")
def items():
    rng = random.Random(0)
    return [sample_item("tool", rng) for _ in range(600)]


def test_tool_is_a_short_family():
    assert "tool" in FAMILIES and "tool" in SHORT_FAMILIES and not FAMILIES["tool"].long


def test_kinds_are_mixed_and_text_answers_rare(items):
    kinds = Counter(i.meta["kind"] for i in items)
    assert set(kinds) == {"call", "generated", "parallel", "result", "chat", "json"}
    assert 0.05 < kinds["chat"] / len(items) < 0.2
    assert all(i.tools is None for i in items if i.meta["kind"] == "json")
    assert all(i.tools and 1 <= len(i.tools) <= 4 for i in items if i.meta["kind"] != "json")


def test_call_answers_are_what_the_template_writes_for_tool_calls(items, tok):
    """The answer equals the chat template's rendering of an assistant turn with those tool_calls."""
    for item in [i for i in items if "calls" in i.meta][:80]:
        calls = item.meta["calls"]
        assert item.answer == tool_call_text(calls) and parse_tool_calls(item.answer) == calls
        rendered = tok.apply_chat_template(item.messages + [{"role": "assistant", "content": "", "tool_calls": calls}], tools=item.tools, tokenize=False)
        prompt = tok.apply_chat_template(item.messages, tools=item.tools, add_generation_prompt=True, tokenize=False)
        assert rendered == prompt + item.answer + "<end_of_turn>\n"
        for call in calls:
            assert call["arguments"] == json.loads(json.dumps(call["arguments"], ensure_ascii=False))
            assert f'{json.dumps(call["arguments"], ensure_ascii=False)}}}</tool_call>' in item.answer


def test_arguments_follow_the_schema_and_come_from_the_request(items):
    for item in [i for i in items if "calls" in i.meta]:
        by_name = {t["name"]: t for t in item.tools}
        request = item.messages[-1]["content"]
        assert item.messages[-1]["role"] == "user"
        for call in item.meta["calls"]:
            props = list(by_name[call["name"]]["parameters"]["properties"])
            assert list(call["arguments"]) == [p for p in props if p in call["arguments"]], "keys in `properties` order"
            required = by_name[call["name"]]["parameters"].get("required", [])
            assert set(required) <= set(call["arguments"])
            for value in call["arguments"].values():
                if isinstance(value, str) and call["name"] != "Joke":
                    assert value in request, (value, request)
                elif isinstance(value, int) and not isinstance(value, bool):
                    assert str(value) in request, (value, request)


def test_unicode_values_are_copied_verbatim():
    rng = random.Random(3)
    names = set()
    for _ in range(3000):
        item = sample_item("tool", rng)
        for call in item.meta.get("calls", []):
            if call["name"] == "unicode_customer":
                names.add(call["arguments"]["customer_name"])
                assert call["arguments"]["customer_name"] in item.answer  # ensure_ascii=False: no \\u escapes
    assert any(ord(c) > 0x3000 for n in names for c in n) and any("ë" in n or "ü" in n or "ø" in n for n in names)


def test_result_turns_end_on_the_tool_message_and_answer_in_text(items):
    results = [i for i in items if i.meta["kind"] == "result"]
    assert results
    for item in results:
        assert [m["role"] for m in item.messages[-3:]] == ["user", "assistant", "tool"]
        assert item.messages[-1]["name"] == item.messages[-2]["tool_calls"][0]["name"]
        assert "<tool_call>" not in item.answer


def test_json_answers_have_exactly_the_keys_asked_in_order(items):
    for item in [i for i in items if i.meta["kind"] == "json"]:
        got = json.loads(item.answer)
        assert list(got) == list(item.meta["fields"])
        request = item.messages[-1]["content"]
        positions = [request.find(k) for k in got]
        assert all(p >= 0 for p in positions)


def test_prompt_and_answer_lengths(items, tok):
    lengths = [len(encode_prompt(tok, i.messages, i.tools)) for i in items]
    answers = [i.count_tokens(tok) for i in items]
    assert sorted(lengths)[int(0.95 * len(lengths))] < 650 and max(answers) < 200


def test_scorer_partial_credit():
    item = next(i for i in generate_suite(30, "test", 0, ("tool",)) if i.meta["kind"] == "call" and i.meta["calls"][0]["arguments"])
    call = item.meta["calls"][0]
    assert score(item, item.answer).exact and score(item, " " + item.answer + "\n").exact
    wrong_args = {k: "nope" for k in call["arguments"]}
    assert score(item, tool_call_text([{"name": call["name"], "arguments": wrong_args}])).family_score == 0.5
    assert score(item, tool_call_text([{"name": "other", "arguments": call["arguments"]}])).family_score == 0.5
    reordered = dict(reversed(list(call["arguments"].items())))
    s = score(item, tool_call_text([{"name": call["name"], "arguments": reordered}]))
    assert s.family_score == 1.0 and s.exact == (len(call["arguments"]) == 1)  # order only counts for exact match
    assert score(item, item.answer + item.answer).family_score == 0.5  # an extra call
    assert score(item, "The weather is nice.").family_score == 0.0
    assert score(item, "<tool_call>{not json</tool_call>").family_score == 0.0

    text = next(i for i in generate_suite(60, "test", 0, ("tool",)) if i.meta["kind"] == "result")
    assert score(text, text.answer).family_score == 1.0 and score(text, "<tool_call>{}</tool_call>").family_score == 0.0

    js = next(i for i in generate_suite(60, "test", 0, ("tool",)) if i.meta["kind"] == "json")
    fields = js.meta["fields"]
    assert score(js, json.dumps(dict(reversed(list(fields.items()))))).family_score == (1.0 if len(fields) == 1 else 0.5)
    assert score(js, json.dumps({k: "x" for k in fields})).family_score == 0.5
    assert score(js, "no json").family_score == 0.0


def test_parse_tool_calls():
    calls = [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "get_weather", "arguments": {"location": "Zürich"}}]
    text = tool_call_text(calls)
    assert text == '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call><tool_call>{"name": "get_weather", "arguments": {"location": "Zürich"}}</tool_call>'
    assert parse_tool_calls(text) == calls and parse_tool_calls("plain text") is None


def test_training_and_evaluation_render_the_tools(tok):
    item = next(i for i in generate_suite(10, "train", 0, ("tool",)) if i.tools)
    prompt, answer = encode_item(tok, item)
    text = tok.decode(prompt)
    assert "Tools:" in text and item.tools[0]["name"] in text and answer[-1] == tok.eos_token_id
    assert item_prompt(item) == {"messages": item.messages, "tools": item.tools}
    plain = generate_suite(1, "test", 0, ("extract",))[0]
    assert item_prompt(plain) == {"messages": plain.messages}


def test_engine_renders_tool_items_as_training_does(tok):
    """evaluate's requests (messages + tools) reach the model as the prompt ids training used."""
    from engines.replica.engine import DiffusionEngine
    from lab.model.evaluate import Setting, make_request

    engine = DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)
    for item in generate_suite(6, "test", 0, ("tool",)):
        req = make_request(engine, item, Setting("ar"), seed=0)
        assert req.grammar is None and engine.prompt_ids(req) == encode_prompt(tok, item.messages, item.tools)


def test_tool_family_is_opt_in_for_training_and_trains_in_its_own_steps(tok):
    default = TrainConfig()
    assert all("tool" not in make_batch(tok, default, step).families for step in range(6))
    cfg = TrainConfig(family_weights=dict(default.family_weights, tool=2.0), tool_batch_prob=0.5, batch_tool=4, batch_short=4, batch_long=2)
    batches = [make_batch(tok, cfg, step) for step in range(12)]
    tool_steps = [b for b in batches if "tool" in b.families]
    assert tool_steps and all(set(b.families) == {"tool"} and len(b.families) == 4 for b in tool_steps)
    assert any(set(b.families) - {"tool"} for b in batches)
