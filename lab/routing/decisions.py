"""Reading the decisions log back for retraining (offline): `read_decisions` pages through the
stream `router.gateway.decisions_log` writes, `to_training_record` turns an entry into a data-set line.

Entries of format "1" carried the whole request in `features`; entries of format "2" carry prompt
text only in the opt-in `text` field, and entries without it cannot be retrained on (they are
counted and skipped). Labels, each used by the head it trains (lab/routing/train.py):
- task: the outcome's reviewed `task` if present, else the router's own prediction when it was
  confident (a pseudo-label); an unsure entry has none;
- length: the outcome's `output_tokens`;
- block_agrees: for a block answer that was shadow-verified (policy shadow_verify_rate), whether AR
  would have written exactly that answer (`shadow_agreement` == 1).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from router.gateway.decisions_log import FORMAT_VERSION, PSEUDO_LABEL_MIN_CONFIDENCE, STREAM

log = logging.getLogger("tandem.router.decisions")

TEXT_KEYS = ("messages", "tools", "response_format", "stop")


@dataclass
class LoggedDecision:
    id: str  # stream entry id
    ts: float  # unix seconds when it was logged
    features: dict  # the `features` field (format "1": the whole request, text included)
    decision: dict
    outcome: dict
    text: dict | None = None  # the opt-in `text` field (format "1": taken from `features`); None without it
    version: str = FORMAT_VERSION

    @property
    def has_text(self) -> bool:
        """Whether the entry carries the prompt messages retraining needs."""
        return bool(self.text and self.text.get("messages"))


def _str(x) -> str:
    return x.decode() if isinstance(x, bytes) else x


def _parse(entry_id: str, f: dict[str, str]) -> LoggedDecision:
    version = f.get("v", "1")
    features = json.loads(f["features"])
    if version == "1":
        text = {k: features[k] for k in TEXT_KEYS if features.get(k) is not None} or None
    else:
        text = json.loads(f["text"]) if "text" in f else None
    return LoggedDecision(entry_id, float(f.get("ts", 0)), features, json.loads(f.get("decision", "{}")),
                          json.loads(f.get("outcome", "{}")), text, version)


def read_decisions(redis_client, stream: str = STREAM, count: int | None = None, batch: int = 1000) -> Iterator[LoggedDecision]:
    """Entries oldest first (at most `count`); entries that do not parse are skipped with a warning."""
    start, seen = "-", 0
    while count is None or seen < count:
        n = batch if count is None else min(batch, count - seen)
        rows = redis_client.xrange(stream, min=start, max="+", count=n)
        if not rows:
            return
        for entry_id, fields in rows:
            entry_id = _str(entry_id)
            try:
                yield _parse(entry_id, {_str(k): _str(v) for k, v in fields.items()})
            except (KeyError, ValueError, TypeError, AttributeError) as exc:
                log.warning("skipping malformed decision entry %s: %s", entry_id, exc)
                continue
            seen += 1
        start = "(" + _str(rows[-1][0])
        if len(rows) < n:
            return


def to_training_record(entry: LoggedDecision) -> dict | None:
    """A data-set line from a logged decision, or None when it has no text (`entry.has_text`) or
    no usable label."""
    from policies.schema import TASKS

    if not entry.has_text:
        return None
    task = entry.outcome.get("task")
    if task is None and float(entry.decision.get("confidence", 0.0)) >= PSEUDO_LABEL_MIN_CONFIDENCE:
        task = entry.decision.get("task")
    task = task if task in TASKS else None
    tokens = entry.outcome.get("output_tokens")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1 else None
    share = entry.outcome.get("shadow_agreement")
    agrees = bool(share >= 1.0) if entry.outcome.get("mode") == "block" and isinstance(share, (int, float)) else None
    if task is None and tokens is None and agrees is None:
        return None
    rec = {k: entry.text[k] for k in TEXT_KEYS if entry.text.get(k) is not None}
    if entry.features.get("max_tokens") is not None:
        rec["max_tokens"] = entry.features["max_tokens"]
    labels = {"task": task, "output_tokens": tokens, "block_agrees": agrees}
    rec.update({k: v for k, v in labels.items() if v is not None}, source=f"redis:{entry.id}")
    return rec
