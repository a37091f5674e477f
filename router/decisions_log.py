"""The decisions log: one Redis stream entry per routed request, the data the router retrains on.

Stream `tandem:decisions` (capped with an approximate MAXLEN). Each entry has these fields, all
strings:

- `v`         entry format version ("1")
- `ts`        unix seconds when it was logged
- `features`  JSON: the request as routing saw it: `messages`, `model`, `max_tokens`,
              `response_format`, `tools`, `stop`, plus `prompt_tokens` and `feature_version`
- `decision`  JSON: the Decision (mode, task, confidence, predicted_tokens, policy_version, ...)
- `outcome`   JSON: what happened: `output_tokens`, `finish_reason`, `latency_ms`,
              `accepted`/`drafted` (verified mode), and optionally a reviewed `task` label

`log_decision` never raises: when Redis is down it returns False and counts the drop in
`stats`. `read_decisions` pages through the stream; `to_training_record` turns an entry into a
data-set line (task label: the outcome's reviewed `task` if present, else the router's own
prediction when it was confident - a pseudo-label; length: the outcome's `output_tokens`, which
like the data set's labels is already capped by max_tokens).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

log = logging.getLogger("tandem.router.decisions")

STREAM = "tandem:decisions"
FORMAT_VERSION = "1"
PSEUDO_LABEL_MIN_CONFIDENCE = 0.9


@dataclass
class LogStats:
    """Counters of the writer (plain attributes; metrics exporters read them)."""

    written: int = 0
    dropped: int = 0  # entries lost because Redis failed
    last_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


stats = LogStats()


def request_features(request) -> dict:
    """The `features` field for a RouteRequest (or a dict with the same keys)."""
    from router.features import FEATURE_VERSION, content_text

    d = request if isinstance(request, dict) else request.model_dump()
    chars = sum(len(content_text(m.get("content"))) for m in d["messages"])
    return {
        "messages": d["messages"],
        "model": d.get("model", "tandem"),
        "max_tokens": d.get("max_tokens"),
        "response_format": d.get("response_format"),
        "tools": d.get("tools"),
        "stop": d.get("stop"),
        "prompt_tokens": (chars + 3) // 4,
        "feature_version": FEATURE_VERSION,
    }


def log_decision(redis_client, features: dict, decision: dict, outcome: dict, maxlen: int = 100_000, stream: str = STREAM) -> bool:
    """XADD one entry (approximate MAXLEN). Returns False, counting the drop, if anything fails."""
    try:
        entry = {
            "v": FORMAT_VERSION,
            "ts": f"{time.time():.3f}",
            "features": json.dumps(features, separators=(",", ":")),
            "decision": json.dumps(decision, separators=(",", ":")),
            "outcome": json.dumps(outcome, separators=(",", ":")),
        }
        redis_client.xadd(stream, entry, maxlen=maxlen, approximate=True)
    except Exception as exc:  # a logging path must never break serving
        with stats._lock:
            stats.dropped += 1
            first = stats.last_error is None
            stats.last_error = f"{type(exc).__name__}: {exc}"
        if first or stats.dropped % 1000 == 0:
            log.warning("decision log to %s failed (%d dropped so far): %s", stream, stats.dropped, stats.last_error)
        return False
    with stats._lock:
        stats.written += 1
        stats.last_error = None
    return True


@dataclass
class LoggedDecision:
    id: str  # stream entry id
    ts: float
    features: dict
    decision: dict
    outcome: dict


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else x


def read_decisions(redis_client, stream: str = STREAM, count: int | None = None, batch: int = 1000) -> Iterator[LoggedDecision]:
    """Entries oldest first (at most `count`); entries that do not parse are skipped with a warning."""
    start, seen = "-", 0
    while count is None or seen < count:
        n = batch if count is None else min(batch, count - seen)
        rows = redis_client.xrange(stream, min=start, max="+", count=n)
        if not rows:
            return
        for entry_id, fields in rows:
            entry_id = _text(entry_id)
            f = {_text(k): _text(v) for k, v in fields.items()}
            try:
                yield LoggedDecision(entry_id, float(f.get("ts", 0)), json.loads(f["features"]), json.loads(f.get("decision", "{}")), json.loads(f.get("outcome", "{}")))
            except (KeyError, ValueError) as exc:
                log.warning("skipping malformed decision entry %s: %s", entry_id, exc)
                continue
            seen += 1
        start = "(" + _text(rows[-1][0])
        if len(rows) < n:
            return


def to_training_record(entry: LoggedDecision) -> dict | None:
    """A data-set line from a logged decision, or None when it has no usable labels."""
    from policies.schema import TASKS

    task = entry.outcome.get("task")
    if task is None and float(entry.decision.get("confidence", 0.0)) >= PSEUDO_LABEL_MIN_CONFIDENCE:
        task = entry.decision.get("task")
    tokens = entry.outcome.get("output_tokens")
    if task not in TASKS or not isinstance(tokens, int) or tokens < 1 or not entry.features.get("messages"):
        return None
    rec = {k: entry.features[k] for k in ("messages", "max_tokens", "response_format", "tools", "stop") if entry.features.get(k) is not None}
    rec.update(task=task, output_tokens=tokens, source=f"redis:{entry.id}")
    return rec
