"""The learned router on held-out data: accuracy, mode agreement, the length quantile, the lean
serving path against scikit-learn, and safe loading."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from router.features import FEATURE_VERSION, features_of
from router.classifier import DEFAULT_MODEL_PATH, TRUSTED_TYPES, ModelError, load_model
from router.training.fit import predict_reference
from router.training.train import evaluate
from tests.router.test_decide import policy


@pytest.fixture(scope="module")
def report(model, held_out):
    # the data's mode labels follow the product's default task modes, not the shipped checkpoint's
    return evaluate(model, held_out, policy=policy())


def test_task_accuracy_on_held_out_split_is_at_least_95_percent(report):
    assert report["n"] >= 500
    assert report["accuracy"] >= 0.95, report["accuracy"]
    for task in report["labels"]:
        assert report["per_class"][task]["recall"] >= 0.85, (task, report["per_class"][task])


def test_mode_agreement_with_the_default_policy_is_at_least_95_percent(report):
    assert report["mode_agreement"] >= 0.95, report["mode_agreement"]


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
