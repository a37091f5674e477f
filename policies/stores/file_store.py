"""The YAML file policy store (`file`, a path): one file on one machine, edited by hand or by
`tandem policy apply`.

The file is reloaded when its mtime/size/inode changes, checked on access at most every
`check_interval_s`, so `current()` costs a clock read on most calls. A broken hand edit is
refused and the last good policy stays. Writes take an exclusive `flock` on `<file>.lock`,
compare versions, lay a patch over the file as it is then, and replace the file atomically (write a temp file, `os.replace`); history
goes to a `<file>.history.jsonl` beside it, starting with the hand-written original.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml

from policies.errors import PolicyError, StaleVersionError
from policies.schema import Policy
from policies.stores.base import PolicyRecord, PolicyStore, check_write, read_policy_file, resolve_write

log = logging.getLogger("tandem.policies")


class FileStore(PolicyStore):
    """A policy in a YAML file, reloaded when the file changes."""

    name: ClassVar[str] = "file"

    def __init__(self, path: str | os.PathLike, check_interval_s: float = 0.5):
        self.path = Path(path)
        self.history_path = self.path.with_name(self.path.name + ".history.jsonl")
        self.check_interval_s = check_interval_s  # how often current() may stat the file
        self._policy: Policy | None = None
        self._stamp: tuple | None = None
        self._checked_at = 0.0
        self.last_error: str | None = None
        self.reloads_total = 0  # successful (re)loads
        self.invalid_total = 0  # loads refused because the file was unreadable or invalid
        self._reload()

    def describe(self) -> str:
        return str(self.path)

    def _file_stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload(self) -> None:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        if stamp is None:
            self.last_error = f"{self.path} does not exist"
            return
        try:
            policy = read_policy_file(self.path)
        except PolicyError as exc:
            self.invalid_total += 1
            self.last_error = exc.message
            log.error("policy file %s refused, keeping version %s: %s", self.path, getattr(self._policy, "version", None), exc.message)
            return
        if self._policy is not None and policy != self._policy:
            log.info("policy file %s reloaded: version %d -> %d", self.path, self._policy.version, policy.version)
        self._policy = policy
        self.reloads_total += 1
        self.last_error = None

    def current(self) -> Policy:
        now = time.monotonic()
        if now - self._checked_at >= self.check_interval_s:
            self._checked_at = now
            self._reload()
        if self._policy is None:
            raise PolicyError(f"no valid policy at {self.path}: {self.last_error}")
        return self._policy

    @contextlib.contextmanager
    def _locked(self):
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _on_disk(self) -> Policy | None:
        return read_policy_file(self.path) if self.path.exists() else None

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "", *,
              patch: bool = False) -> Policy:
        checked = check_write(policy, patch)
        with self._locked():
            old = self._on_disk()
            cur = old.version if old is not None else 0
            if expect_version is not None and expect_version != cur:
                raise StaleVersionError(expect_version, cur)
            new = resolve_write(checked, old)  # a patch is laid over the file as it is now
            if old is not None and cur not in self._recorded():  # keep the hand-written original
                self._append_history(PolicyRecord(cur, old.content(), time.time(), "before first apply"))
            stored = new.model_copy(update={"version": cur + 1})
            body = {"version": stored.version, **stored.content()}
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(yaml.safe_dump(body, sort_keys=False))
            os.replace(tmp, self.path)
            self._append_history(PolicyRecord(stored.version, stored.content(), time.time(), note))
        self._checked_at = 0.0
        self._reload()
        log.info("policy version %d written to %s", stored.version, self.path)
        return stored

    def _append_history(self, rec: PolicyRecord) -> None:
        with open(self.history_path, "a") as fh:
            fh.write(rec.to_json() + "\n")

    def _recorded(self) -> dict[int, PolicyRecord]:
        recs: dict[int, PolicyRecord] = {}
        if self.history_path.exists():
            for line in self.history_path.read_text().splitlines():
                if line.strip():
                    rec = PolicyRecord.from_json(line)
                    recs[rec.version] = rec
        return recs

    def history(self) -> list[PolicyRecord]:
        recs = self._recorded()
        if self._policy is not None and self._policy.version not in recs:
            recs[self._policy.version] = PolicyRecord(self._policy.version, self._policy.content(), 0.0, "current file")
        return [recs[v] for v in sorted(recs)]

    def status(self) -> dict[str, Any]:
        return {
            "store": self.name,
            "source": str(self.path),
            "version": self._policy.version if self._policy else None,
            "healthy": self.last_error is None,
            "last_error": self.last_error,
            "reloads_total": self.reloads_total,
            "invalid_total": self.invalid_total,
        }
