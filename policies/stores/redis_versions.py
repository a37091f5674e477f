"""Versioned policy keys in Redis: where a policy and its history live, and how a write numbers it.

Keys: `<prefix>policy:current` holds the active policy as JSON with its `version`;
`<prefix>policy:history` is a hash version -> record; `<prefix>policy:max_version` is the highest
version written; every write publishes `{"version": n}` on `<prefix>policy:updates` (the channel
the store's watcher listens on, `policies.stores.redis_store`). Writes are compare-and-set under
WATCH/MULTI on the current policy and the version mark.

Versions only grow, even across a Redis that restarted empty (or from an older snapshot) while
replicas still serve a higher version: the store remembers the highest version it has served or
written (`seen_version`) and puts the mark back when Redis holds less (`restore_mark`); a write
takes max(current, max_version, seen_version) + 1. And the policy itself comes back: a replica
finding no current policy writes back the one it serves under its own version (`write_back`),
the highest version served winning, so every replica converges on it. Connection errors are left to the caller (the
store counts them and keeps serving); nothing here holds a policy in memory.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from policies.schema import Policy
from policies.stores.base import PolicyRecord

log = logging.getLogger("tandem.policies")

WRITTEN_BACK = "written back"  # the note of a version a replica put back after Redis lost it (`PolicyVersions.write_back`)
Build = Callable[[str | None, int], "tuple[Policy, str] | None"]  # (raw current, its version) -> (policy, note), or None: write nothing


def stored_version(value: Any) -> int:
    """A version as Redis holds it (a string, or None when absent); 0 when absent or garbled."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class PolicyVersions:
    """The policy keys under one `prefix` of one Redis `client` (`response_errors`: the library's
    ResponseError, raised by a refused command)."""

    def __init__(self, client, prefix: str, response_errors: type[Exception], shown_url: str):
        self.client = client
        self.key_current = f"{prefix}policy:current"
        self.key_history = f"{prefix}policy:history"
        self.key_max_version = f"{prefix}policy:max_version"  # the highest version written; restored by stores
        self.channel = f"{prefix}policy:updates"
        self._response_errors = response_errors
        self._shown_url = shown_url  # for logs: no password
        self._mark_refused = False  # the version mark could not be restored (e.g. a read-only user): logged once

    def read(self) -> tuple[str | None, int]:
        """The current policy's JSON (None when nothing is stored) and the version mark."""
        raw, mark = self.client.mget(self.key_current, self.key_max_version)
        return raw, stored_version(mark)

    def restore_mark(self, version: int) -> None:
        """Raise `max_version` back to `version` (the highest a store has seen): Redis forgot versions."""

        def txn(pipe) -> bool:
            if stored_version(pipe.get(self.key_max_version)) >= version:
                return False
            pipe.multi()
            pipe.set(self.key_max_version, version)
            return True

        try:
            if self.client.transaction(txn, self.key_max_version, value_from_callable=True):
                log.warning("policy store %s had lost policy versions up to %d (restarted empty?); the next write is "
                            "version %d or later", self._shown_url, version, version + 1)
        except self._response_errors as exc:  # e.g. a read-only user: keep serving, say it once
            if not self._mark_refused:
                log.error("cannot restore %s to %d: %s", self.key_max_version, version, exc)
            self._mark_refused = True

    def write(self, build: Build, seen_version: int) -> tuple[Policy, str] | None:
        """One compare-and-set write, under WATCH on the current policy and the version mark.
        `build(raw, current_version)` gives the policy to store and its note (or None: write
        nothing); it is stored as version max(current, max_version, seen_version) + 1, with its
        history record, the new mark and an update message. With nothing stored, the current
        version is the highest known (what replicas served before Redis forgot). Returns the stored
        policy and its JSON."""

        def txn(pipe) -> tuple[Policy, str] | None:
            raw, mark = pipe.mget(self.key_current, self.key_max_version)
            known = max(stored_version(mark), seen_version)
            cur = int(json.loads(raw)["version"]) if raw else known
            built = build(raw, cur)
            if built is None:
                return None
            new, note = built
            stored = new.model_copy(update={"version": max(cur, known) + 1})
            body = json.dumps({"version": stored.version, **stored.content()}, sort_keys=True)
            rec = PolicyRecord(stored.version, stored.content(), time.time(), note)
            pipe.multi()
            pipe.set(self.key_current, body)
            pipe.hset(self.key_history, str(stored.version), rec.to_json())
            pipe.set(self.key_max_version, stored.version)
            pipe.publish(self.channel, json.dumps({"version": stored.version}))
            return stored, body

        return self.client.transaction(txn, self.key_current, self.key_max_version, value_from_callable=True)

    def write_back(self, policy: Policy, note: str) -> bool:
        """Store `policy` under its own version (with its history record, the mark and an update
        message) where Redis holds no current policy, or holds a lower version that was itself
        written back (its record's note starts with WRITTEN_BACK): after Redis restarts empty, each
        replica writes back what it serves and the highest version wins, so every replica converges
        on it. A policy an operator wrote meanwhile is never replaced here (the store renumbers a
        lower one instead). Returns whether it was written."""

        def txn(pipe) -> bool:
            raw, mark = pipe.mget(self.key_current, self.key_max_version)
            if raw is not None:
                stored = int(json.loads(raw)["version"])
                record = pipe.hget(self.key_history, str(stored))
                if stored >= policy.version or record is None or not PolicyRecord.from_json(record).note.startswith(WRITTEN_BACK):
                    return False
            body = json.dumps({"version": policy.version, **policy.content()}, sort_keys=True)
            pipe.multi()
            pipe.set(self.key_current, body)
            pipe.hset(self.key_history, str(policy.version), PolicyRecord(policy.version, policy.content(), time.time(), note).to_json())
            pipe.set(self.key_max_version, max(stored_version(mark), policy.version))
            pipe.publish(self.channel, json.dumps({"version": policy.version}))
            return True

        return self.client.transaction(txn, self.key_current, self.key_max_version, self.key_history, value_from_callable=True)

    def written_back(self, version: int) -> bool:
        """Whether the stored `version` is a replica's write-back (not an operator's write)."""
        record = self.record(version)
        return record is not None and record.note.startswith(WRITTEN_BACK)

    def history(self) -> list[PolicyRecord]:
        """Every version written, oldest first."""
        return sorted((PolicyRecord.from_json(v) for v in self.client.hgetall(self.key_history).values()), key=lambda r: r.version)

    def record(self, version: int) -> PolicyRecord | None:
        """The record of one version, or None when history has none."""
        raw = self.client.hget(self.key_history, str(version))
        return None if raw is None else PolicyRecord.from_json(raw)
