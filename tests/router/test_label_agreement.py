"""`tandem router label-agreement`: the shipped checkpoint labels the data set's block requests
with whether its block answer is AR's (for a request with a fixed skeleton: whether seeded block
means what constrained AR does), resumably; training joins the labels by id."""

from __future__ import annotations

import json
from pathlib import Path

from tandem.main import main
from lab.routing.dataset import TRAIN_PATH, load_jsonl
from lab.routing.label_agreement import labels_for, load_labels, same_answer, structured_call, with_labels


def pick(style: str, task: str) -> dict:
    return next(r for r in load_jsonl(TRAIN_PATH) if r["style"] == style and r["task"] == task and not r.get("tools") and not r.get("response_format"))


def test_labels_come_from_the_model_and_a_rerun_resumes(tmp_path, capsys):
    suite, natural = pick("task_suite", "classify"), pick("natural", "summarize")
    with_tools = next(r for r in load_jsonl(TRAIN_PATH) if r.get("tools") and structured_call(r) is not None)
    json_object = next(r for r in load_jsonl(TRAIN_PATH) if (r.get("response_format") or {}).get("type") == "json_object")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (suite, natural, with_tools, json_object)))
    assert main(["router", "label-agreement", "--data", str(data)]) == 0
    out = labels_for(data)
    labels = load_labels(out)
    # A one-label answer in the suite's own format is AR's in block too; a natural summary is not;
    # a request with tools has a skeleton block can seed, and is labeled; a json_object answer has
    # none (block cannot seed it: the skeleton rule never asks the head) and is not.
    assert {k: v for k, v in labels.items() if k != with_tools["id"]} == {suite["id"]: True, natural["id"]: False}
    assert isinstance(labels[with_tools["id"]], bool) and json_object["id"] not in labels
    assert json.loads(out.read_text().splitlines()[0])["checkpoint"] == "tandem-tiny"
    assert main(["router", "label-agreement", "--data", str(data)]) == 0
    assert "0 to label" in capsys.readouterr().out and load_labels(out) == labels


def test_structured_answers_agree_when_they_mean_the_same():
    assert same_answer('{"name": "Ada", "age": 3}', '{"age": 3, "name": "Ada"}', tools=False)  # the order of keys is not meaning
    assert not same_answer('{"name": "Ada"}', '{"name": "Adda"}', tools=False)
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}}</tool_call>'
    assert same_answer(call, call.replace('"city": "Oslo", "unit": "c"', '"unit": "c", "city": "Oslo"'), tools=True)
    assert not same_answer(call, call.replace("Oslo", "Bergen"), tools=True)
    assert not same_answer(call, "It is sunny in Oslo.", tools=True)  # a call against content
    assert same_answer("Hello!", "Hello!", tools=True) and not same_answer("Hello!", "Hi!", tools=True)


def test_training_joins_labels_by_id_and_logged_labels_win():
    records = [{"id": "a", "task": "classify"}, {"id": "b", "task": "plan", "block_agrees": False}, {"id": "c"}]
    joined = with_labels(records, {"a": True, "b": True})
    assert [r.get("block_agrees") for r in joined] == [True, False, None]


def test_the_shipped_labels_cover_the_train_and_held_out_splits():
    train, test = load_labels(labels_for(TRAIN_PATH)), load_labels(labels_for(Path(TRAIN_PATH).with_name("routing_test.jsonl")))
    assert len(train) >= 2000 and len(test) >= 600
    assert 0 < sum(train.values()) < len(train)  # both outcomes: the head can be fitted


def test_bad_arguments_are_one_line_errors_and_write_nothing(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["router", "label-agreement", "--data", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"tandem: no such data file: {missing}"
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(pick("task_suite", "classify")) + "\n")
    assert main(["router", "label-agreement", "--data", str(data), "--checkpoint", str(tmp_path)]) == 2
    assert "not a checkpoint directory" in capsys.readouterr().err
    assert not labels_for(data).exists()
