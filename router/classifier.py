"""The learned part of the router: a task-type classifier and an answer-length predictor.

Training artefact (scikit-learn, saved with skops):
- `classifier`: Pipeline(ColumnTransformer(word tf-idf on the user text, char_wb tf-idf on its
  head, word tf-idf on the system/earlier turns, StandardScaler on the numbers),
  CalibratedClassifierCV(SGDClassifier(hinge), sigmoid, cv=3, ensemble=False)) -> calibrated probabilities
  of the nine task types.
- `text_length`: Ridge on the classifier's own fitted features (the same columns) predicting
  log(1 + answer tokens) from the wording: "one word", "a Python function `f(x)`" and "a
  400-word essay" share a task type but not a length.
- `length`: GradientBoostingRegressor(loss="quantile", alpha=0.9) on [task probabilities, the
  text-length estimate, numeric features] predicting log(1 + answer tokens); its output is the
  p90 length, which the policy compares with the canvas sizes and the cost model prices. It is
  trained on cross-validated probabilities and text estimates, so it sees their real error
  rather than their near-perfect training-set fit.

Serving path: sklearn's per-call overhead (input validation, sparse matrices, ColumnTransformer)
costs milliseconds per request, so `RouterModel` compiles the fitted pipeline into a lean
predictor at load time: each vectorizer's term -> column lookup (char n-gram columns cached per
word, word 1-2 grams looked up as tokens and token pairs), the linear
weights pre-multiplied by idf, the scaler folded in, the per-class sigmoid calibrators as
(a, b) arrays, and the boosted trees as padded node arrays walked level by level for all trees
at once. The result equals the pipeline's output to float rounding (tests check it), in tens of
microseconds. The sklearn objects stay the artefact of record (`predict_reference`).

Loading never executes arbitrary code: skops loads with the explicit TRUSTED_TYPES list below,
and saving checks that the file needs nothing outside it.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from router.features import FEATURE_VERSION, NUMERIC_FEATURES, RequestFeatures
from router.types import Prediction

MODELS_DIR = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL_PATH = MODELS_DIR / "default.skops"
TEXT_FIELDS = ("user", "chars", "context")
QUANTILE = 0.9

# The types a router model file needs beyond skops's default-trusted set (scikit-learn estimators,
# numpy and scipy arrays, builtins). Loading trusts exactly these and nothing else; `save_model`
# fails if a changed pipeline would need another (then review it and add it here knowingly).
TRUSTED_TYPES: list[str] = [
    "sklearn.calibration._CalibratedClassifier",
    "sklearn.calibration._SigmoidCalibration",
    "sklearn.tree._tree.Tree",
]


class ModelError(Exception):
    """A model file is missing, untrusted, or was trained on other features."""


# --- building and fitting -----------------------------------------------------------------------


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
    """A fitted classifier, text-length model and length regressor, with a lean per-request predictor."""

    def __init__(self, classifier, text_length, length, meta: dict | None = None):
        self.classifier = classifier
        self.text_length = text_length
        self.length = length
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
        # The text-length Ridge reads the same columns: one more output row, computed in the same pass.
        coef = np.vstack([coef, np.asarray(self.text_length.coef_, dtype=np.float64).reshape(1, -1)])
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
        self._intercept = np.append(np.asarray(est.intercept_, dtype=np.float64), float(self.text_length.intercept_))
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
        """K class decisions, then the text-length estimate (log(1 + tokens))."""
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
        raw = self._trees.predict(np.concatenate([p, dec[K:], f.numeric]))
        tokens = max(1, math.ceil(math.expm1(raw)))
        return Prediction(self.classes[k], float(p[k]), dict(zip(self.classes, p.tolist())), tokens)

    # the sklearn path (reference, batch)
    def predict_reference(self, feats: list[RequestFeatures]) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities (n, K), p90 tokens (n,)) through the sklearn objects themselves."""
        X = to_matrix(feats)
        probs = self.classifier.predict_proba(X)
        text = self.text_length.predict(self.classifier.named_steps["features"].transform(X))
        raw = self.length.predict(length_inputs(probs, text, feats))
        return probs, tokens_from_log(raw)


# --- saving and loading -------------------------------------------------------------------------


def save_model(model: RouterModel, path: str | Path) -> Path:
    """Write `<path>` (skops) and `<path minus .skops>.json` (metadata). Refuses if the file would
    need a type outside TRUSTED_TYPES."""
    import skops.io as sio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = sio.dumps({"classifier": model.classifier, "text_length": model.text_length, "length": model.length,
                      "meta_json": json.dumps(model.meta)}, compression=8)
    untrusted = set(sio.get_untrusted_types(data=blob)) - set(TRUSTED_TYPES)
    if untrusted:
        raise ModelError(f"model needs types outside router.classifier.TRUSTED_TYPES: {sorted(untrusted)}")
    path.write_bytes(blob)
    path.with_suffix(".json").write_text(json.dumps(model.meta, indent=2, sort_keys=True) + "\n")
    return path


def load_model(path: str | Path | None = None) -> RouterModel:
    """Load a model saved by `save_model`, trusting only TRUSTED_TYPES."""
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
    return RouterModel(obj["classifier"], obj["text_length"], obj["length"], meta)
