"""Building, fitting and saving the router model's scikit-learn pipelines (offline only).

The artefact (see router/decision/classifier.py for how serving reads it):
- `classifier`: Pipeline(ColumnTransformer(word tf-idf on the user text, char_wb tf-idf on its
  head, word tf-idf on the system/earlier turns, StandardScaler on the numbers),
  CalibratedClassifierCV(SGDClassifier(hinge), sigmoid, cv=3, ensemble=False)) -> calibrated probabilities
  of the nine task types.
- `text_length`: Ridge on the classifier's own fitted features (the same columns) predicting
  log(1 + answer tokens) from the wording: "one word", "a Python function `f(x)`" and "a
  400-word essay" share a task type but not a length.
- `length`: GradientBoostingRegressor(loss="quantile", alpha=QUANTILE) on [task probabilities,
  the text-length estimate, numeric features] predicting log(1 + answer tokens); its output is
  the p90 length, which the policy compares with the canvas sizes and the cost model prices.
  lab/routing/train.py fits it on cross-validated probabilities and text estimates, so it
  sees their real error rather than their near-perfect training-set fit.
- `agreement` (only when the data carry `block_agrees` labels, from logged shadow verification):
  LogisticRegression(class_weight="balanced") on the classifier's fitted features, the
  probability that block's answer to a request is exactly AR's. The router keeps a block
  decision off block when it is low (policy `agreement_floor`).

`predict_reference` runs the sklearn objects themselves (the artefact of record): the tests
check the lean serving path against it and `tandem bench router` times it. `save_model` writes
the skops file and refuses one that would need a type outside `router.decision.classifier.TRUSTED_TYPES`.
scikit-learn and skops are imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from router.decision.classifier import TEXT_FIELDS, TRUSTED_TYPES, ModelError, RouterModel
from router.decision.features import NUMERIC_FEATURES, RequestFeatures

QUANTILE = 0.9  # the length regressor's quantile: the p90 answer length


# --- building -----------------------------------------------------------------------------------


def to_matrix(feats: list[RequestFeatures]) -> np.ndarray:
    """Rows of [user, chars, context, *numeric] as an object array (the pipeline's input)."""
    rows = [[f.user, f.chars, f.context, *f.numeric] for f in feats]
    return np.array(rows, dtype=object).reshape(len(rows), 3 + len(NUMERIC_FEATURES))


def build_features():
    """The request -> sparse matrix transform shared by the classifier and the text-length model."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    n = len(NUMERIC_FEATURES)
    return ColumnTransformer(
        [
            ("user", TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=8000, sublinear_tf=True), 0),
            ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=3, max_features=8000, sublinear_tf=True), 1),
            ("context", TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=2000, sublinear_tf=True), 2),
            ("numbers", StandardScaler(), list(range(3, 3 + n))),
        ],
        sparse_threshold=1.0,
    )


def build_classifier(alpha: float = 1e-4, seed: int = 0):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import Pipeline

    # A linear SVM trained by SGD: liblinear's LinearSVC is ~10x slower here for the same accuracy.
    svm = SGDClassifier(loss="hinge", alpha=alpha, average=True, max_iter=50, tol=1e-4, random_state=seed, n_jobs=1)
    clf = CalibratedClassifierCV(svm, method="sigmoid", cv=3, ensemble=False)
    return Pipeline([("features", build_features()), ("clf", clf)])


def build_text_length(alpha: float = 1.0):
    """Ridge from the request's features to log(1 + answer tokens). Fitted on the classifier's own
    transform for serving (one vocabulary pass gives both); `text_length_pipeline` gives the
    out-of-fold estimates the boosted trees train on."""
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha)


def build_agreement(C: float = 1.0):
    """Logistic regression from the request's features to "block's answer is AR's"; balanced,
    because the logged labels come from whatever share of block answers disagreed."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, class_weight="balanced", max_iter=1000)


def text_length_pipeline(alpha: float = 1.0):
    from sklearn.pipeline import Pipeline

    return Pipeline([("features", build_features()), ("ridge", build_text_length(alpha))])


def slim(classifier) -> None:
    """Shrink the fitted pipeline before saving: drop state that only partial_fit needs (SGD's
    averaging buffers, two more copies of the weights) and store vocabularies with plain int
    columns (numpy ints become one file entry each in a skops archive)."""
    ct = classifier.named_steps["features"]
    for name in TEXT_FIELDS:
        vec = ct.named_transformers_[name]
        vec.vocabulary_ = {term: int(col) for term, col in vec.vocabulary_.items()}
    for cc in classifier.named_steps["clf"].calibrated_classifiers_:
        for attr in ("_standard_coef", "_standard_intercept", "_average_coef", "_average_intercept"):
            if hasattr(cc.estimator, attr):
                delattr(cc.estimator, attr)


def build_length_regressor(seed: int = 0):
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(
        loss="quantile", alpha=QUANTILE, n_estimators=150, max_depth=3, learning_rate=0.1, subsample=0.9, random_state=seed
    )


def length_inputs(probs: np.ndarray, text_length: np.ndarray, feats: list[RequestFeatures]) -> np.ndarray:
    """[task probabilities, text-length estimate, numeric features] per row: the length regressor's input."""
    num = np.array([f.numeric for f in feats], dtype=np.float64).reshape(len(feats), len(NUMERIC_FEATURES))
    return np.hstack([probs, np.asarray(text_length, dtype=np.float64).reshape(-1, 1), num])


def tokens_from_log(raw: np.ndarray | float) -> np.ndarray:
    return np.maximum(1, np.ceil(np.expm1(raw))).astype(int)


# --- the sklearn path (reference, batch) --------------------------------------------------------


def predict_reference(model: RouterModel, feats: list[RequestFeatures]) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities (n, K), p90 tokens (n,)) through the model's sklearn objects themselves."""
    X = to_matrix(feats)
    probs = model.classifier.predict_proba(X)
    text = model.text_length.predict(model.classifier.named_steps["features"].transform(X))
    raw = model.length.predict(length_inputs(probs, text, feats))
    return probs, tokens_from_log(raw)


def agreement_reference(model: RouterModel, feats: list[RequestFeatures]) -> np.ndarray | None:
    """P(block's answer is AR's) per row through the sklearn objects, or None without that head."""
    if model.agreement is None:
        return None
    X = model.classifier.named_steps["features"].transform(to_matrix(feats))
    return model.agreement.predict_proba(X)[:, list(model.agreement.classes_).index(1)]


# --- saving -------------------------------------------------------------------------------------


def save_model(model: RouterModel, path: str | Path) -> Path:
    """Write `<path>` (skops) and `<path minus .skops>.json` (metadata), the pair
    `router.decision.classifier.load_model` reads. Refuses if the file would need a type outside TRUSTED_TYPES."""
    import skops.io as sio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = {"classifier": model.classifier, "text_length": model.text_length, "length": model.length,
             "meta_json": json.dumps(model.meta)} | ({"agreement": model.agreement} if model.agreement is not None else {})
    blob = sio.dumps(parts, compression=8)
    untrusted = set(sio.get_untrusted_types(data=blob)) - set(TRUSTED_TYPES)
    if untrusted:
        raise ModelError(f"model needs types outside router.decision.classifier.TRUSTED_TYPES: {sorted(untrusted)}")
    path.write_bytes(blob)
    path.with_suffix(".json").write_text(json.dumps(model.meta, indent=2, sort_keys=True) + "\n")
    return path
