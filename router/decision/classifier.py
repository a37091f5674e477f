"""The learned part of the router at serving time: load the shipped model, predict per request.

A router model file (scikit-learn, saved with skops by lab/routing/fit.py) holds three
fitted objects: `classifier`, a Pipeline(ColumnTransformer of tf-idf vectorizers and a
StandardScaler, CalibratedClassifierCV(SGDClassifier, sigmoid, ensemble=False)) giving calibrated
probabilities of the nine task types; `text_length`, a Ridge on the classifier's own features
predicting log(1 + answer tokens) from the wording; and `length`, a quantile
GradientBoostingRegressor on [task probabilities, text-length estimate, numeric features]
predicting the p90 of log(1 + answer tokens); and `agreement`, a LogisticRegression on the
classifier's features giving the probability that a block answer to the request is as good as
AR's (labels: what the checkpoint wrote on the data set, `tandem router label-agreement`, and
logged shadow verification; a model trained without any has none). Plus `meta`
(feature version, data hash, metrics).
How they are built and fitted, and the sklearn reference path, live in lab/routing/fit.py.

Serving path: sklearn's per-call overhead (input validation, sparse matrices, ColumnTransformer)
costs milliseconds per request, so `RouterModel` compiles the fitted pipeline into a lean
predictor at load time: each vectorizer's term -> column lookup (char n-gram columns cached per
word, word 1-2 grams looked up as tokens and token pairs), the linear
weights pre-multiplied by idf, the scaler folded in, the per-class sigmoid calibrators as
(a, b) arrays, and the boosted trees as padded node arrays walked level by level for all trees
at once. The result equals the pipeline's output to float rounding (tests check it against
`lab.routing.fit.predict_reference`), in tens of microseconds. The sklearn objects stay the
artefact of record.

Loading never executes arbitrary code: skops loads with the explicit TRUSTED_TYPES list below,
and saving (`lab.routing.fit.save_model`) checks that the file needs nothing outside it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from router.decision.features import FEATURE_VERSION, NUMERIC_FEATURES, RequestFeatures
from router.decision.types import Prediction

MODELS_DIR = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL_PATH = MODELS_DIR / "default.skops"
TEXT_FIELDS = ("user", "chars", "context")  # the pipeline's text columns, in input order

# The types a router model file needs beyond skops's default-trusted set (scikit-learn estimators,
# numpy and scipy arrays, builtins). Loading trusts exactly these and nothing else;
# `lab.routing.fit.save_model` fails if a changed pipeline would need another (then review it
# and add it here knowingly).
TRUSTED_TYPES: list[str] = [
    "sklearn.calibration._CalibratedClassifier",
    "sklearn.calibration._SigmoidCalibration",
    "sklearn.tree._tree.Tree",
]


class ModelError(Exception):
    """A model file is missing, untrusted, or was trained on other features."""


# --- the lean serving path ----------------------------------------------------------------------


class _Terms:
    """The vocabulary columns of a text's terms, exactly as `vectorizer.transform` counts them.

    char_wb n-grams never cross a word, so each word's in-vocabulary columns are computed once
    and cached (bounded); word 1-2 grams look tokens and token pairs up in two dicts. Other
    vectorizer settings fall back to the vectorizer's own analyzer."""

    CACHE_WORDS = 50_000

    def __init__(self, vec):
        self.preprocess = vec.build_preprocessor()
        self.vocab: dict = vec.vocabulary_
        self.kind = "generic"
        lo, hi = vec.ngram_range
        if vec.analyzer == "char_wb":
            self.kind, self.ngram_range, self.cache = "char_wb", (lo, hi), {}
            self._white = re.compile(r"\s\s+")
        elif vec.analyzer == "word" and (lo, hi) in ((1, 1), (1, 2)) and vec.get_stop_words() is None:
            self.kind, self.bigrams = "word", hi == 2
            self.tokenize = vec.build_tokenizer()
            self.uni = {t: c for t, c in self.vocab.items() if " " not in t}
            self.bi = {tuple(t.split(" ")): c for t, c in self.vocab.items() if t.count(" ") == 1}
        else:
            self.analyzer = vec.build_analyzer()

    def _word_columns(self, w: str) -> list[int]:
        lo, hi = self.ngram_range
        w = " " + w + " "
        out, vocab = [], self.vocab
        for n in range(lo, hi + 1):  # as sklearn's _char_wb_ngrams
            offset = 0
            grams = [w[0:n]]
            while offset + n < len(w):
                offset += 1
                grams.append(w[offset : offset + n])
            out += [vocab[g] for g in grams if g in vocab]
            if offset == 0:
                break
        return out

    def columns(self, text: str) -> list[int]:
        if self.kind == "char_wb":
            cols: list[int] = []
            cache = self.cache
            for w in self._white.sub(" ", self.preprocess(text)).split():
                c = cache.get(w)
                if c is None:
                    c = self._word_columns(w)
                    if len(cache) < self.CACHE_WORDS:
                        cache[w] = c
                cols += c
            return cols
        if self.kind == "word":
            toks = self.tokenize(self.preprocess(text))
            uni = self.uni
            cols = [uni[t] for t in toks if t in uni]
            if self.bigrams and len(toks) > 1:
                bi = self.bi
                cols += [bi[p] for p in zip(toks, toks[1:]) if p in bi]
            return cols
        vocab = self.vocab
        return [vocab[t] for t in self.analyzer(text) if t in vocab]


@dataclass
class _Text:
    terms: _Terms  # text -> vocabulary columns, one per occurrence
    idf: np.ndarray  # (D,)
    weights: np.ndarray  # (D, K) = coef.T * idf
    sublinear: bool


class _Trees:
    """Boosted regression trees as padded arrays; leaves loop to themselves."""

    def __init__(self, gbr, n_inputs: int):
        trees = [est.tree_ for est in gbr.estimators_[:, 0]]
        m = max(t.node_count for t in trees)
        T = len(trees)
        self.feature = np.zeros((T, m), dtype=np.intp)
        self.threshold = np.full((T, m), np.inf)
        self.left = np.zeros((T, m), dtype=np.intp)
        self.right = np.zeros((T, m), dtype=np.intp)
        self.value = np.zeros((T, m))
        for k, t in enumerate(trees):
            n = t.node_count
            leaf = t.children_left == -1
            idx = np.arange(n)
            self.feature[k, :n] = np.where(leaf, 0, t.feature)
            self.threshold[k, :n] = np.where(leaf, np.inf, t.threshold)
            self.left[k, :n] = np.where(leaf, idx, t.children_left)
            self.right[k, :n] = np.where(leaf, idx, t.children_right)
            self.value[k, :n] = t.value[:, 0, 0]
        self.depth = max(t.max_depth for t in trees)
        self.rows = np.arange(T)
        self.rate = gbr.learning_rate
        self.baseline = float(gbr.init_.predict(np.zeros((1, n_inputs)))[0])

    def predict(self, x: np.ndarray) -> float:
        x = x.astype(np.float32).astype(np.float64)  # sklearn trees compare float32 inputs
        node = np.zeros(len(self.rows), dtype=np.intp)
        rows = self.rows
        for _ in range(self.depth):
            go_left = x[self.feature[rows, node]] <= self.threshold[rows, node]
            node = np.where(go_left, self.left[rows, node], self.right[rows, node])
        return self.baseline + self.rate * float(self.value[rows, node].sum())


class RouterModel:
    """A fitted classifier, text-length model, length regressor and (optional) agreement model,
    with a lean per-request predictor."""

    def __init__(self, classifier, text_length, length, meta: dict | None = None, agreement=None):
        self.classifier = classifier
        self.text_length = text_length
        self.length = length
        self.agreement = agreement
        self.meta = dict(meta or {})
        self.classes: list[str] = [str(c) for c in classifier.classes_]
        self._compile()

    def _compile(self) -> None:
        ct = self.classifier.named_steps["features"]
        cal = self.classifier.named_steps["clf"]
        if len(cal.calibrated_classifiers_) != 1:
            raise ModelError("the lean path needs CalibratedClassifierCV(ensemble=False)")
        cc = cal.calibrated_classifiers_[0]
        est = cc.estimator
        coef = np.asarray(est.coef_, dtype=np.float64)  # (K, D_total)
        K = len(self.classes)
        if coef.shape[0] != K:
            raise ModelError(f"expected one-vs-rest weights for {K} classes, got {coef.shape[0]}")
        # The text-length Ridge and the agreement model read the same columns: one more output row
        # each, computed in the same pass.
        extra = [np.asarray(self.text_length.coef_, dtype=np.float64).reshape(1, -1)]
        intercepts = [float(self.text_length.intercept_)]
        if self.agreement is not None:
            extra.append(np.asarray(self.agreement.coef_, dtype=np.float64).reshape(1, -1))
            intercepts.append(float(self.agreement.intercept_[0]))
        coef = np.vstack([coef, *extra])
        self._texts: list[tuple[int, _Text]] = []
        for name, col in zip(TEXT_FIELDS, range(3)):
            vec = ct.named_transformers_[name]
            sl = ct.output_indices_[name]
            idf = np.asarray(vec.idf_, dtype=np.float64)
            self._texts.append(
                (col, _Text(_Terms(vec), idf, np.ascontiguousarray(coef[:, sl].T * idf[:, None]), bool(vec.sublinear_tf)))
            )
        scaler = ct.named_transformers_["numbers"]
        sl = ct.output_indices_["numbers"]
        self._num_mean = np.asarray(scaler.mean_, dtype=np.float64)
        self._num_scale = np.asarray(scaler.scale_, dtype=np.float64)
        self._num_coef = np.ascontiguousarray(coef[:, sl])  # (K, N)
        self._intercept = np.append(np.asarray(est.intercept_, dtype=np.float64), intercepts)
        # sigmoid calibrators, in the calibrated classifier's class order
        order = [self.classes.index(str(c)) for c in est.classes_]
        self._cal_a = np.zeros(K)
        self._cal_b = np.zeros(K)
        self._cal_order = np.array(order)
        for j, calib in enumerate(cc.calibrators):
            self._cal_a[j], self._cal_b[j] = float(calib.a_), float(calib.b_)
        self._trees = _Trees(self.length, K + 1 + len(NUMERIC_FEATURES))

    # lean path
    def _decision(self, f: RequestFeatures) -> np.ndarray:
        """K class decisions, the text-length estimate (log(1 + tokens)), then the agreement logit if any."""
        dec = self._intercept.copy()
        texts = (f.user, f.chars, f.context)
        for col, t in self._texts:
            counts = Counter(t.terms.columns(texts[col]))
            if not counts:
                continue
            idx = np.fromiter(counts.keys(), dtype=np.intp, count=len(counts))
            tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            if t.sublinear:
                tf = np.log(tf) + 1.0
            w = tf * t.idf[idx]
            norm = math.sqrt(float(w @ w))
            if norm > 0:
                dec += (tf @ t.weights[idx]) / norm
        x = (np.array(f.numeric, dtype=np.float64) - self._num_mean) / self._num_scale
        dec += self._num_coef @ x
        return dec

    def probabilities(self, f: RequestFeatures) -> np.ndarray:
        """Calibrated task-type probabilities (in self.classes order) for one request."""
        return self._calibrate(self._decision(f)[: len(self.classes)])

    def _calibrate(self, dec: np.ndarray) -> np.ndarray:
        p = np.zeros(len(self.classes))
        p[self._cal_order] = 1.0 / (1.0 + np.exp(self._cal_a * dec + self._cal_b))
        s = p.sum()
        return p / s if s > 0 else np.full_like(p, 1.0 / len(p))

    def predict(self, f: RequestFeatures) -> Prediction:
        dec = self._decision(f)
        K = len(self.classes)
        p = self._calibrate(dec[:K])
        k = int(p.argmax())
        raw = self._trees.predict(np.concatenate([p, dec[K : K + 1], f.numeric]))
        tokens = max(1, math.ceil(math.expm1(raw)))
        agreement = _sigmoid(float(dec[K + 1])) if self.agreement is not None else None
        return Prediction(self.classes[k], float(p[k]), dict(zip(self.classes, p.tolist())), tokens, agreement)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


# --- loading ------------------------------------------------------------------------------------


def load_model(path: str | Path | None = None) -> RouterModel:
    """Load a model saved by `lab.routing.fit.save_model`, trusting only TRUSTED_TYPES."""
    import skops.io as sio

    path = Path(path or DEFAULT_MODEL_PATH)
    if path.is_dir():
        path = path / "default.skops"
    if not path.exists():
        raise ModelError(f"no router model at {path}; train one with `tandem router train`")
    untrusted = set(sio.get_untrusted_types(file=path)) - set(TRUSTED_TYPES)
    if untrusted:
        raise ModelError(f"{path} contains untrusted types {sorted(untrusted)}; refusing to load")
    obj = sio.load(path, trusted=TRUSTED_TYPES)
    meta = json.loads(obj["meta_json"])
    if meta.get("feature_version") != FEATURE_VERSION:
        raise ModelError(
            f"{path} was trained on feature version {meta.get('feature_version')}, this code computes version {FEATURE_VERSION}; retrain"
        )
    return RouterModel(obj["classifier"], obj["text_length"], obj["length"], meta, obj.get("agreement"))
