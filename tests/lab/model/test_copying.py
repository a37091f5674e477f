"""Copy accuracy (lab/model/copying.py): every token of a copied value gets its role, the measure
is read teacher-forced through the AR path, and it tells the skeleton a model has learned from the
values it has not."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

from lab.model.copying import COPY_FAMILIES, ROLES, copy_accuracy, predicted_answer, token_roles, value_spans
from lab.model.items import encode_prompt
from lab.model.tasks import generate_suite
from lab.model.train import greedy_ar

STRUCTURED = "lab/model/runs/structured-h192"  # the mixed CPU recipe's weights (issue 37): no induction head
COPYING = "lab/model/runs/structured-copy128"  # the copy-first recipe's: one


@pytest.fixture(scope="module")
def structured():
    tokenizer = AutoTokenizer.from_pretrained(STRUCTURED, local_files_only=True)
    return DiffusionGemmaForBlockDiffusion.from_pretrained(STRUCTURED, local_files_only=True).eval(), tokenizer


@pytest.mark.parametrize("family", COPY_FAMILIES)
def test_every_copied_value_is_found_and_its_tokens_get_roles(family, structured):
    _, tokenizer = structured
    items = generate_suite(20, "test", 0, (family,))
    assert sum(bool(value_spans(i)) for i in items) >= 15, "most items copy a string (the rest only numbers or enum choices)"
    for item in items:
        spans = value_spans(item)
        ids, roles = token_roles(tokenizer, item)
        assert len(ids) == len(roles) and set(roles) <= set(ROLES)
        assert roles.count("first") == len(spans), "one first token per value"
        values = "".join(tokenizer.decode([t]) for t, role in zip(ids, roles) if role != "other")
        for s, e in spans:
            assert item.answer[s:e] in item.prompt and item.answer[s:e][-3:] in values


def test_teacher_forced_predictions_are_what_greedy_ar_writes_after_the_same_prefix(structured):
    """The measure reads the AR path: at each answer position its argmax is the token greedy AR (with
    its KV cache) writes after the prompt and the reference's tokens before that position."""
    model, tokenizer = structured
    item = generate_suite(1, "test", 0, ("toolcall",))[0]
    answer, predicted = predicted_answer(model, tokenizer, item)
    prompt = encode_prompt(tokenizer, item.messages, item.tools)
    for k in (0, 1, len(answer) // 2, len(answer) - 1):
        assert greedy_ar(model, tokenizer, prompt + answer[:k], max_new_tokens=1) == [predicted[k]]
    report = copy_accuracy(model, tokenizer, [item])
    assert sum(report[f"{r}_n"] for r in ROLES) == len(answer)


def test_tells_a_model_that_copies_from_one_that_only_knows_the_skeleton(structured):
    """The mixed recipe's weights (no induction head) write the skeleton but not the values; the
    copy-first recipe's (lab/model/runs/structured-copy128) copy them: the measure separates the two."""
    model, tokenizer = structured
    items = generate_suite(6, "test", 0, ("schema",))
    without = copy_accuracy(model, tokenizer, items)
    assert without["other"] >= 0.8 and without["rest"] < 0.6
    assert all(without[f"{r}_n"] > 0 for r in ROLES) and model.training is False
    tokenizer = AutoTokenizer.from_pretrained(COPYING, local_files_only=True)
    copying = DiffusionGemmaForBlockDiffusion.from_pretrained(COPYING, local_files_only=True)
    with_head = copy_accuracy(copying, tokenizer, items)
    assert with_head["rest"] >= 0.9 and with_head["rest"] > without["rest"] + 0.3


def test_the_training_loop_logs_copy_accuracy_with_each_check(tmp_path):
    import json

    from lab.model.train import TrainConfig, train

    weights = dict.fromkeys(("extract", "classify", "summarize", "plan", "code", "reason", "write"), 0.0) | {"schema": 1.0}
    cfg = TrainConfig(out=str(tmp_path), hidden_size=64, num_layers=2, vocab_size=600, tokenizer_items=30, batch_short=4,
                      warmup=2, log_every=1000, eval_every_s=0, eval_items=2, eval_block_open=False, ckpt_every_s=1e9,
                      family_weights=weights, threads=1)
    train(cfg, max_steps=1)
    checks = [r for r in map(json.loads, (tmp_path / "train_log.jsonl").read_text().splitlines()) if "eval" in r]
    copy = checks[0]["copy"]  # the schema items among the check's items, read teacher-forced
    assert all(copy[f"{r}_n"] > 0 and 0.0 <= copy[r] <= 1.0 for r in ROLES)


def test_command_line_refuses_what_is_not_a_checkpoint_and_bad_copy_steps(tmp_path, capsys):
    from lab.model.copying import main
    from lab.model.train import parser

    with pytest.raises(SystemExit) as exc:
        main(["--checkpoint", str(tmp_path)])  # an empty folder
    assert exc.value.code == 2 and "not a checkpoint directory" in capsys.readouterr().err
    for value in ("-1", "many"):
        with pytest.raises(SystemExit) as exc:
            parser().parse_args(["--copy-first-steps", value])
        assert exc.value.code == 2 and "--copy-first-steps" in capsys.readouterr().err
    assert parser().parse_args(["--copy-first-steps", "700"]).copy_first_steps == 700
