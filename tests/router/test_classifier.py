"""The learned router on held-out data: accuracy, mode agreement, the length quantile, the lean
serving path against scikit-learn, and safe loading."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from router.decision.features import FEATURE_VERSION, features_of
from router.decision.classifier import DEFAULT_MODEL_PATH, TRUSTED_TYPES, ModelError, load_model
from lab.routing.fit import predict_reference
from lab.routing.train import evaluate
from policies.stores import default_policy
from tests.floors import at_least
from tests.measures import shipped_router_counts, shipped_router_report
from tests.router.helpers import policy


@pytest.fixture(scope="module")
def report(model, held_out):
    return shipped_router_report(model, held_out)


def test_task_accuracy_on_the_held_out_split(report):
    right, _ = shipped_router_counts(report)
    at_least("shipped router task accuracy", right, of=report["n"])
    for task in report["labels"]:
        assert report["per_class"][task]["recall"] >= 0.85, (task, report["per_class"][task])


def test_mode_agreement_with_the_default_policy(report):
    _, agreeing = shipped_router_counts(report)
    at_least("shipped router mode agreement", agreeing, of=report["n"])


def test_length_predictor_is_a_high_quantile(report, model, held_out):
    assert 0.8 <= report["length_coverage"] <= 0.98  # p90: about nine answers in ten fit under it
    by_task = {}
    for r in held_out:
        by_task.setdefault(r["task"], []).append(model.predict(features_of(r)).predicted_tokens)
    assert np.median(by_task["classify"]) <= 64
    assert np.median(by_task["write"]) > 256
    assert np.median(by_task["reason"]) > 128


def test_probabilities_are_calibrated_distributions(model, held_out):
    for r in held_out[:50]:
        p = model.probabilities(features_of(r))
        assert p.shape == (len(model.classes),) and abs(p.sum() - 1) < 1e-9 and (p >= 0).all()


def test_lean_path_equals_the_sklearn_pipeline(model, held_out):
    feats = [features_of(r) for r in held_out[:300]]
    probs, tokens = predict_reference(model, feats)
    lean = np.array([model.probabilities(f) for f in feats])
    assert np.abs(probs - lean).max() < 1e-9
    assert [model.predict(f).predicted_tokens for f in feats] == tokens.tolist()


def test_shipped_model_carries_its_metadata(model):
    meta = json.loads(DEFAULT_MODEL_PATH.with_suffix(".json").read_text())
    assert meta["feature_version"] == FEATURE_VERSION == model.meta["feature_version"]
    assert len(meta["data_sha256"]) == 64 and meta["n_train"] >= 2000
    assert meta["metrics"]["accuracy"] >= 0.95
    assert DEFAULT_MODEL_PATH.stat().st_size < 4_000_000


def test_loading_refuses_types_outside_the_trusted_list(tmp_path):
    import skops.io as sio

    bad = tmp_path / "bad.skops"
    sio.dump({"meta_json": "{}", "x": Fraction(1, 3)}, bad)
    assert "fractions.Fraction" not in TRUSTED_TYPES
    with pytest.raises(ModelError, match="untrusted"):
        load_model(bad)


def test_loading_refuses_a_model_trained_on_other_features(tmp_path, model):
    import skops.io as sio

    old = tmp_path / "old.skops"
    meta = {**model.meta, "feature_version": FEATURE_VERSION + 1}
    old.write_bytes(sio.dumps({"classifier": model.classifier, "length": model.length, "meta_json": json.dumps(meta)}))
    with pytest.raises(ModelError, match="feature version"):
        load_model(old)


def test_the_agreement_head_keeps_block_where_the_model_writes_ar_s_answer(report, model, held_out):
    # Held-out requests labeled by running the shipped checkpoint (`tandem router label-agreement`):
    # block is AR's answer on most of its own suite's labels, code and reasoning, on about half its
    # summaries and plans, almost never on natural requests but one-word labels, where it is a coin
    # toss no feature sees (AR's label on 24 of 110 natural held-out ones). At the policy's floor the head keeps
    # block for most of the first and few of the rest. Measured on the checkpoint shipped 2026-12-06
    # (docs/router.md): right on 0.814 of the requests without a grammar, block kept on 0.912 where
    # it agrees and 0.208 where it differs (the weights before it: 0.942, 0.969, 0.063).
    from lab.routing.dataset import TEST_PATH
    from lab.routing.label_agreement import labels_for, load_labels, with_labels

    a = report["agreement"]
    assert a["n"] >= 600 and 0 < a["agree"] < a["n"]
    labeled = with_labels(held_out, load_labels(labels_for(TEST_PATH)))
    floor = policy(agreement_floor=default_policy().agreement_floor)
    plain = evaluate(model, [r for r in labeled if not (r.get("tools") or r.get("response_format"))], policy=floor)["agreement"]
    assert plain["accuracy"] >= 0.8 and plain["block_kept_where_agrees"] >= 0.9 and plain["block_kept_where_differs"] <= 0.21, plain
    # Requests with a fixed skeleton (a schema, tools), where seeded block means what constrained AR
    # does on 12 of 72 held-out ones: the head leans the right way (0.917 kept where block agrees,
    # 0.633 where it differs), weakly: 237 such labels to learn from (docs/router.md).
    skeleton = evaluate(model, [r for r in labeled if r.get("tools") or r.get("response_format")], policy=floor)["agreement"]
    assert skeleton["n"] >= 60 and skeleton["block_kept_where_agrees"] >= skeleton["block_kept_where_differs"] + 0.2, skeleton


def test_prompts_unlike_the_training_data_stay_off_block(model):
    # Hand-written prompts no template wrote (never trained on): the shipped router sends none of
    # them to block, whose answers to them are never AR's; the suite's own labels stay on block
    # under a policy that sends labels there (the shipped one sends them to AR: sooner on a CPU).
    from pathlib import Path

    from lab.model.tasks import generate_suite
    from policies.stores import default_policy
    from router.decision.decide import Router

    from router.decision.classifier import RouterModel

    router = Router(model=model)  # the shipped serving policy
    headless = Router(model=RouterModel(model.classifier, model.text_length, model.length, model.meta, None))  # no agreement head
    real = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "realistic_prompts.jsonl").read_text().splitlines()]
    requests = [{"messages": r["messages"], "max_tokens": 256} for r in real]
    decisions, without_head = [router.decide(r) for r in requests], [headless.decide(r) for r in requests]
    assert not [d.mode for d in decisions if d.mode == "block"]
    # the head is what keeps them off: every prompt the policy alone sends to block, and all but a
    # few it sends to verified's drafts (lossless: a miss costs time, not the answer), are moved to
    # AR by the disagreement rule (measured 2026-12-06: one verified code completion of 28 stays,
    # at 0.31 against the floor of 0.3)
    drafted = {i for i, d in enumerate(without_head) if d.mode in ("block", "verified")}
    assert drafted, "without the head no realistic prompt goes to block or verified: the test shows nothing"
    moved = {i for i, d in enumerate(decisions) if d.rule == "disagreement"}
    assert moved <= drafted and {i for i in drafted if without_head[i].mode == "block"} <= moved
    assert len(drafted - moved) <= 2 and all(decisions[i].mode == "ar" for i in moved)
    shipped = default_policy()
    labels_on_block = Router(model=model, store=shipped.model_copy(update={"task_modes": {**shipped.task_modes, "classify": "block"}}))
    suite_labels = generate_suite(4, split="test", seed=0, families=("classify",))
    labels = [labels_on_block.decide({"messages": it.messages, "max_tokens": 256}) for it in suite_labels]
    assert all(d.mode == "block" for d in labels)
