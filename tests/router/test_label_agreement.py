"""`tandem router label-agreement`: the shipped checkpoint labels the data set's block requests
with whether its block answer is AR's, resumably; training joins the labels by id."""

from __future__ import annotations

import json
from pathlib import Path

from lab.cli.main import main
from lab.routing.dataset import TRAIN_PATH, load_jsonl
from lab.routing.label_agreement import labels_for, load_labels, with_labels


def pick(style: str, task: str) -> dict:
    return next(r for r in load_jsonl(TRAIN_PATH) if r["style"] == style and r["task"] == task and not r.get("tools") and not r.get("response_format"))


def test_labels_come_from_the_model_and_a_rerun_resumes(tmp_path, capsys):
    suite, natural = pick("task_suite", "classify"), pick("natural", "summarize")
    with_tools = next(r for r in load_jsonl(TRAIN_PATH) if r.get("tools"))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (suite, natural, with_tools)))
    assert main(["router", "label-agreement", "--data", str(data)]) == 0
    out = labels_for(data)
    labels = load_labels(out)
    # A one-label answer in the suite's own format is AR's in block too; a natural summary is not;
    # a request with tools follows its own rules and is not labeled.
    assert labels == {suite["id"]: True, natural["id"]: False}
    assert json.loads(out.read_text().splitlines()[0])["checkpoint"] == "tandem-tiny"
    assert main(["router", "label-agreement", "--data", str(data)]) == 0
    assert "0 to label" in capsys.readouterr().out and load_labels(out) == labels


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
