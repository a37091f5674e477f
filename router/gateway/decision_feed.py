"""`DecisionFeed`: the last few hundred routing decisions of one gateway replica with what came of
them (mode served, latency, tokens per forward, acceptance, the cost model's estimate), for the
operators' console (`GET /admin/decisions`). In memory and per replica: it holds no prompt text
and is lost on restart; the Redis decisions stream is the durable, cross-replica record.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque

FEED_SIZE = 500  # entries kept; a console polling every second reads a few at a time


class DecisionFeed:
    def __init__(self, size: int = FEED_SIZE):
        self.id = uuid.uuid4().hex[:12]  # a console that sees a new id knows the replica restarted (seq starts over)
        self._entries: deque[dict] = deque(maxlen=size)
        self._seq = 0
        self._lock = threading.Lock()

    def add(self, entry: dict) -> int:
        """Append `entry` (JSON-able), stamped with `seq` and `ts`; returns its seq."""
        with self._lock:
            self._seq += 1
            self._entries.append({"seq": self._seq, "ts": round(time.time(), 3)} | entry)
            return self._seq

    def after(self, seq: int = 0, limit: int = 200) -> list[dict]:
        """The entries newer than `seq`, oldest first; at most the newest `limit` of them."""
        with self._lock:
            newer = [e for e in self._entries if e["seq"] > seq]
        return newer[-limit:] if limit > 0 else []

    @property
    def last(self) -> int:
        with self._lock:
            return self._seq

    def record(self, outcome, decision) -> int:
        """An answered request: its decision (`router.decision.types.Decision`) with its `Outcome`
        (router.gateway.outcome), the same fields the decisions log keeps."""
        return self.add(feed_entry(decision, outcome.mode) | {"status": 200} | outcome.record())

    def error(self, decision, mode: str, status: int, code: str | None) -> int:
        """A routed request that got an error (`status`, `code`) in `mode`."""
        return self.add(feed_entry(decision, mode) | {"status": status, "error": code})


def feed_entry(decision, mode: str) -> dict:
    """What the console shows of a decision (`router.decision.types.Decision`) served in `mode` (no prompt text)."""
    return {"request_id": decision.request_id, "mode": mode, "routed_mode": decision.mode, "task": decision.task,
            "rule": decision.rule, "trace": list(decision.trace), "reason": decision.reason, "confidence": round(decision.confidence, 3),
            "predicted_tokens": decision.predicted_tokens, "policy_version": decision.policy_version}
