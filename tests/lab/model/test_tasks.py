"""The task suite: deterministic, split-disjoint, answers a function of the prompt, scorers right."""

from __future__ import annotations

import json
import random
import re

import pytest

from lab.model.tasks import (
    FAMILIES,
    SPLITS,
    TaskItem,
    generate_suite,
    line_accuracy,
    normalize,
    sample_item,
    score,
    split_of,
)

SIGNATURE = re.compile(r"\b(\w+)\(([\w, ]*)\)")  # a listed tool in a plan prompt: name(arg, arg)


def _item(family: str, seed: int = 0) -> TaskItem:
    return generate_suite(1, "train", seed, (family,))[0]


def test_generator_is_deterministic_and_seeded():
    a, b = generate_suite(3, "train", seed=7), generate_suite(3, "train", seed=7)
    assert [(i.messages, i.answer) for i in a] == [(i.messages, i.answer) for i in b]
    c = generate_suite(3, "train", seed=8)
    assert [i.answer for i in a] != [i.answer for i in c]
    assert {i.family for i in a} == set(FAMILIES)


def test_splits_never_share_an_item():
    keys = {s: {i.key for i in generate_suite(30, s, seed=0)} for s in SPLITS}
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]
    for s in SPLITS:
        assert all(split_of(k) == s for k in keys[s])
    # a different seed draws other items but never moves one across splits
    other = {i.key for i in generate_suite(30, "test", seed=1)}
    assert not other & keys["train"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_answer_is_a_function_of_the_prompt_and_prompts_vary(family):
    rng = random.Random(0)
    seen: dict[str, str] = {}
    openings = set()
    for _ in range(150):
        item = sample_item(family, rng)
        # the tool family also ends on a tool result (the model answers from it)
        assert item.family == family and item.messages[-1]["role"] in (("user", "tool") if family == "tool" else ("user",))
        # the content key is the whole prompt: the user message, or for the tool family tools + every turn
        assert seen.setdefault(item.key, item.answer) == item.answer, "same prompt, different answer"
        openings.add(" ".join(item.prompt.split()[:3]))
    assert len(openings) >= 4, f"{family} prompts all start alike: {openings}"


def test_family_answers_have_their_shape():
    fields = json.loads(_item("extract").answer)
    assert isinstance(fields, dict) and fields
    classify = _item("classify")
    assert classify.answer in classify.meta["labels"] and classify.answer in classify.prompt
    plan = _item("plan")
    listed = {m.group(1): [a.strip() for a in m.group(2).split(",") if a.strip()] for m in SIGNATURE.finditer(plan.prompt)}
    calls = json.loads(plan.answer)
    assert calls and all({"tool", "args"} == set(c) for c in calls)
    for c in calls:  # each call names a tool the prompt lists, with that tool's arguments in its order
        assert c["tool"] in listed and list(c["args"]) == listed[c["tool"]], (c, listed)
    assert _item("code").answer.startswith("def ")
    reason = _item("reason")
    lines = reason.answer.split("\n")
    numbers = [int(x) for x in reason.prompt.replace(",", " ").replace("+", " ").split() if x.isdigit()]
    assert 8 <= len(numbers) <= 25 and len(lines) == len(numbers)
    assert lines[-1] == f"Answer: {sum(numbers)}"
    for line, total in zip(lines, [sum(numbers[: i + 2]) for i in range(len(numbers) - 1)]):
        assert line.endswith(f"= {total}")
    assert _item("write").answer.count("\n\n") >= 4


def test_plan_calls_use_listed_tools():
    for item in generate_suite(20, "val", 0, ("plan",)):
        for call in json.loads(item.answer):
            assert call["tool"] + "(" in item.prompt


def test_exact_match_normalises_whitespace():
    item = _item("code")
    assert score(item, "  " + item.answer.replace("\n    ", "\n\t  ") + "\n").exact
    assert not score(item, item.answer + " x").exact
    assert normalize(" a\n\tb  c ") == "a b c"


def test_extract_field_accuracy():
    item = _item("extract")
    want = item.meta["fields"]
    assert score(item, item.answer).family_score == 1.0
    wrong = dict(want)
    key = next(iter(wrong))
    wrong[key] = "nobody"
    s = score(item, json.dumps(wrong))
    assert not s.exact and s.family_score == pytest.approx((len(want) - 1) / len(want))
    assert score(item, "not json {").family_score == 0.0


def test_plan_and_classify_scores():
    plan = _item("plan")
    calls = json.loads(plan.answer)
    half = json.dumps(calls[:1] + [{"tool": "nothing", "args": {}}] * (len(calls) - 1))
    assert score(plan, half).family_score == pytest.approx(1 / len(calls))
    classify = _item("classify")
    assert score(classify, classify.answer.upper() + ".").family_score == 1.0
    other = next(label for label in classify.meta["labels"] if label != classify.answer)
    assert score(classify, other).family_score == 0.0


def test_line_and_fact_scores():
    assert line_accuracy("a\nb\nc\nd", "a\nb\nx\nd") == 0.75
    assert line_accuracy("a\nb", "a\nb\nc") == pytest.approx(2 / 3)
    summary = _item("summarize")
    name = summary.meta["facts"][0]
    assert score(summary, f"{name} did something.").family_score == pytest.approx(1 / len(summary.meta["facts"]))
    write = _item("write")
    sentences = write.answer.split(". ")
    damaged = ". ".join(sentences[:-1] + ["Something else."])
    assert 0.5 < score(write, damaged).family_score < 1.0
