"""Train and evaluate the router model (`tandem router train` / `tandem router evaluate`).

`fit(records)` trains the calibrated task classifier and the p90 length regressor (pipelines
built in lab/routing/fit.py) on data-set lines (see lab/routing/dataset/__init__.py for
the format). `evaluate(model, records)` reports task accuracy, a per-class report, the confusion
matrix, mode agreement (what the default policy decides with this model vs the labeled mode) and
length coverage (share of answers within the predicted p90).
`train(...)` does both, with the held-out split, and saves the model with its metadata.

Everything runs single-threaded (n_jobs=1): the machine is shared.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from lab.routing.dataset import TEST_PATH, TRAIN_PATH, load_jsonl
from lab.routing.label_agreement import labels_for, load_labels, with_labels
from router.decision.features import FEATURE_VERSION, NUMERIC_FEATURES, features_of
from router.decision.classifier import RouterModel
from lab.routing.fit import (
    QUANTILE,
    build_agreement,
    build_classifier,
    build_length_regressor,
    build_text_length,
    length_inputs,
    save_model,
    slim,
    text_length_pipeline,
    to_matrix,
)


def data_hash(records: list[dict]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r, sort_keys=True).encode())
    return h.hexdigest()


def fit(records: list[dict], seed: int = 0) -> RouterModel:
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    # Averaged SGD stops at max_iter on small data sets; the averaged weights are good by then.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _fit(records, seed)


MIN_AGREEMENT_LABELS = 8  # logged shadow verifications needed (both outcomes present) to fit the agreement model


def _fit(records: list[dict], seed: int) -> RouterModel:
    """Each head trains on the records that carry its label: the task classifier on those with a
    `task`, the length models on those with `output_tokens` (a logged answer whose task was unsure
    still says how long it was), the agreement model on those with `block_agrees`."""
    from sklearn.model_selection import KFold, StratifiedKFold, cross_val_predict

    feats = [features_of(r) for r in records]
    X = to_matrix(feats)
    has_task = np.array([r.get("task") is not None for r in records])
    y = np.array([r["task"] for r in records if r.get("task") is not None])
    clf = build_classifier(seed=seed)
    # Out-of-fold probabilities: the length model must learn from the uncertainty it will see live.
    cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=seed)
    probs = np.zeros((len(records), len(set(y))))
    probs[has_task] = cross_val_predict(build_classifier(seed=seed), X[has_task], y, cv=cv, method="predict_proba", n_jobs=1)
    clf.fit(X[has_task], y)
    slim(clf)
    if (~has_task).any():  # never seen by the classifier: its own probabilities are out of sample
        probs[~has_task] = clf.predict_proba(X[~has_task])
    F = clf.named_steps["features"].transform(X)
    has_len = np.array([bool(r.get("output_tokens")) for r in records])
    lengths = np.log1p(np.array([r["output_tokens"] for r in records if r.get("output_tokens")], dtype=np.float64))
    text_length = build_text_length().fit(F[has_len], lengths)
    oof_text = cross_val_predict(text_length_pipeline(), X[has_len], lengths, cv=KFold(n_splits=3, shuffle=True, random_state=seed), n_jobs=1)
    reg = build_length_regressor(seed)
    reg.fit(length_inputs(probs[has_len], oof_text, [f for f, h in zip(feats, has_len) if h]), lengths)
    has_agree = np.array([r.get("block_agrees") is not None for r in records])
    agrees = np.array([int(bool(r["block_agrees"])) for r in records if r.get("block_agrees") is not None])
    agreement = None
    if len(agrees) >= MIN_AGREEMENT_LABELS and len(set(agrees.tolist())) == 2:
        agreement = build_agreement().fit(F[has_agree], agrees)
    import sklearn
    import skops

    meta = {
        "feature_version": FEATURE_VERSION,
        "numeric_features": list(NUMERIC_FEATURES),
        "classes": [str(c) for c in clf.classes_],
        "length_quantile": QUANTILE,
        "n_train": len(records),
        "n_task_labels": int(has_task.sum()),
        "n_length_labels": int(has_len.sum()),
        "agreement_labels": {"n": len(agrees), "agree": int(agrees.sum()), "fitted": agreement is not None},
        "data_sha256": data_hash(records),
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sklearn": sklearn.__version__,
        "skops": skops.__version__,
    }
    return RouterModel(clf, text_length, reg, meta, agreement)


def evaluate(model: RouterModel, records: list[dict], policy=None) -> dict:
    """Metrics on labeled records; `policy` decides the modes (default: the one the data set's mode
    labels follow, `lab.routing.dataset.labeling_policy`)."""
    from sklearn.metrics import classification_report, confusion_matrix

    from lab.routing.dataset import labeling_policy
    from router.decision.decide import Router

    policy = policy or labeling_policy()
    # The mode labels say what the policy gives for (task, length): the agreement head's rule is
    # measured apart (below), at the policy's floor, so it is off for the decisions here.
    router = Router(model=model, store=policy.model_copy(update={"agreement_floor": 0.0}))
    out: dict = {"n": len(records), "policy_version": policy.version}
    tasks_true, tasks_pred, modes_true, modes_pred, covered, fit_true, fit_pred = [], [], [], [], [], [], []
    agree_true, agree_pred = [], []
    limit = policy.block_limit_tokens
    for j, r in enumerate(records):
        req = {k: r[k] for k in ("messages", "max_tokens", "response_format", "tools", "stop") if r.get(k) is not None}
        d = router.decide({**req, "request_id": r.get("id", str(j))})
        if r.get("task"):
            tasks_true.append(r["task"])
            tasks_pred.append(d.task)
        label_mode = r.get("mode")
        if label_mode is None and r.get("task") and r.get("output_tokens"):
            label_mode = policy.route_for(r["task"], r["output_tokens"])[0]
        if label_mode:
            modes_true.append(label_mode)
            modes_pred.append(d.mode)
        if r.get("block_agrees") is not None and d.agreement is not None:
            agree_true.append(bool(r["block_agrees"]))
            agree_pred.append(d.agreement >= policy.agreement_floor)
        if r.get("output_tokens"):
            covered.append(r["output_tokens"] <= d.predicted_tokens)
            fit_true.append(r["output_tokens"] <= limit)
            fit_pred.append(d.predicted_tokens <= limit)
    if tasks_true:
        labels = sorted(set(tasks_true) | set(tasks_pred))
        out["accuracy"] = float(np.mean(np.array(tasks_true) == np.array(tasks_pred)))
        out["per_class"] = classification_report(tasks_true, tasks_pred, labels=labels, output_dict=True, zero_division=0)
        out["labels"] = labels
        out["confusion"] = confusion_matrix(tasks_true, tasks_pred, labels=labels).tolist()
    if modes_true:
        out["mode_agreement"] = float(np.mean(np.array(modes_true) == np.array(modes_pred)))
        mlabels = ["block", "verified", "ar"]
        out["mode_confusion"] = {"labels": mlabels, "matrix": confusion_matrix(modes_true, modes_pred, labels=mlabels).tolist()}
    if agree_true:  # the agreement head on labeled block requests, at the policy's floor
        t, p_ = np.array(agree_true), np.array(agree_pred)
        out["agreement"] = {"n": len(t), "agree": int(t.sum()), "accuracy": float(np.mean(t == p_)),
                            "block_kept_where_agrees": float(p_[t].mean()) if t.any() else None,
                            "block_kept_where_differs": float(p_[~t].mean()) if (~t).any() else None}
    if covered:
        out["length_coverage"] = float(np.mean(covered))  # share of answers within predicted p90 (target ~0.9)
        out["block_fit_agreement"] = float(np.mean(np.array(fit_true) == np.array(fit_pred)))  # fits-the-block-limit, predicted vs true
    return out


def format_report(rep: dict) -> str:
    lines = [f"examples: {rep['n']}"]
    if "accuracy" in rep:
        lines.append(f"task accuracy: {rep['accuracy']:.4f}")
        lines.append("")
        lines.append(f"{'task':<10} {'precision':>9} {'recall':>7} {'f1':>6} {'support':>7}")
        for lab in rep["labels"]:
            c = rep["per_class"][lab]
            lines.append(f"{lab:<10} {c['precision']:>9.3f} {c['recall']:>7.3f} {c['f1-score']:>6.3f} {int(c['support']):>7}")
        lines.append("")
        lines.append("confusion (rows: true, columns: predicted)")
        short = [lab[:6] for lab in rep["labels"]]
        lines.append(f"{'':<10} " + " ".join(f"{s:>6}" for s in short))
        for lab, row in zip(rep["labels"], rep["confusion"]):
            lines.append(f"{lab:<10} " + " ".join(f"{v:>6}" for v in row))
    if "mode_agreement" in rep:
        lines.append("")
        lines.append(f"mode agreement (policy v{rep['policy_version']}): {rep['mode_agreement']:.4f}")
        mc = rep["mode_confusion"]
        lines.append(f"{'':<10} " + " ".join(f"{s:>8}" for s in mc["labels"]))
        for lab, row in zip(mc["labels"], mc["matrix"]):
            lines.append(f"{lab:<10} " + " ".join(f"{v:>8}" for v in row))
    if "agreement" in rep:
        a = rep["agreement"]
        lines.append("")
        lines.append(f"agreement head: {a['n']} labeled block requests ({a['agree']} where block answers as well as AR), "
                     f"accuracy {a['accuracy']:.3f}; block kept on {_share(a['block_kept_where_agrees'])} of those that agree, "
                     f"{_share(a['block_kept_where_differs'])} of those that differ")
    if "length_coverage" in rep:
        lines.append("")
        lines.append(f"length: {rep['length_coverage']:.3f} of answers within predicted p90; "
                     f"fits-block-limit agreement {rep['block_fit_agreement']:.3f}")
    return "\n".join(lines)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def redis_records(url: str, stream: str | None = None, count: int | None = None) -> tuple[list[dict], dict[str, int]]:
    """Data-set lines from the decisions stream, and what was read: `entries`, `no_text` (skipped:
    logged without prompt text, the default; retraining needs the gateway's
    `decisions_log.store_text: true`), `unlabeled` (skipped: no task, length or agreement label),
    and per label how many entries carried it (`task`, `length`, `agreement`)."""
    from policies.stores.base import redis_client
    from router.gateway.decisions_log import STREAM
    from lab.routing.decisions import read_decisions, to_training_record

    client = redis_client(url, socket_timeout=5)
    recs, seen = [], {"entries": 0, "no_text": 0, "unlabeled": 0, "task": 0, "length": 0, "agreement": 0}
    try:
        for e in read_decisions(client, stream or STREAM, count=count):
            seen["entries"] += 1
            rec = to_training_record(e) if e.has_text else None
            if rec is not None:
                recs.append(rec)
                seen["task"] += rec.get("task") is not None
                seen["length"] += rec.get("output_tokens") is not None
                seen["agreement"] += rec.get("block_agrees") is not None
            else:
                seen["no_text" if not e.has_text else "unlabeled"] += 1
    finally:
        client.close()
    return recs, seen


def train(
    data: str | Path | None = None,
    out: str | Path | None = None,
    test: str | Path | None = None,
    from_redis: str | None = None,
    redis_stream: str | None = None,
    base: bool = True,
    seed: int = 0,
    agreement_labels: bool = True,
) -> tuple[RouterModel, dict, Path]:
    """Fit on `data` (default: the shipped train split) with its agreement labels (unless
    `agreement_labels` is False) plus, with `from_redis`, the logged decisions; evaluate on `test`
    (default: the shipped held-out split); save to `out`."""
    from router.decision.classifier import DEFAULT_MODEL_PATH

    records = load_jsonl(data or TRAIN_PATH) if base else []
    if records and agreement_labels:
        records = with_labels(records, load_labels(labels_for(data or TRAIN_PATH)))
    n_redis, redis_seen = 0, None
    if from_redis:
        extra, redis_seen = redis_records(from_redis, redis_stream)
        n_redis = len(extra)
        records += extra
    if len({r["task"] for r in records if r.get("task") is not None}) < 2:
        why = ""
        if redis_seen and redis_seen["no_text"]:
            why = (f"; {redis_seen['no_text']} of {redis_seen['entries']} logged decisions carry no prompt text "
                   "(retraining needs the gateway's decisions_log.store_text: true)")
        raise ValueError(f"need labeled examples of at least two task types; got {len(records)} examples{why}")
    model = fit(records, seed=seed)
    test_path = Path(test or TEST_PATH)
    report = evaluate(model, with_labels(load_jsonl(test_path), load_labels(labels_for(test_path)))) if test_path.exists() else {}
    model.meta["n_from_redis"] = n_redis
    if redis_seen is not None:
        model.meta["redis_entries"] = redis_seen  # read, and skipped for no text / no labels
    model.meta["test_data"] = test_path.name if report else None
    model.meta["metrics"] = {k: report[k] for k in ("accuracy", "mode_agreement", "length_coverage", "block_fit_agreement", "agreement")
                             if k in report}
    if report:
        model.meta["metrics"]["per_class_f1"] = {lab: round(report["per_class"][lab]["f1-score"], 4) for lab in report["labels"]}
    out_path = Path(out) if out else DEFAULT_MODEL_PATH
    if out_path.suffix != ".skops":
        out_path = out_path / "default.skops"
    save_model(model, out_path)
    return model, report, out_path
