"""Policy stores: where the live routing policy comes from, and how it changes.

Two stores behind one interface, chosen by a name->class registry from a source string:

- `file`  (a path): a YAML file, reloaded when its mtime/size/inode changes (checked on access,
  at most every `check_interval_s`). Writes take an exclusive `flock`, compare versions, and
  replace the file atomically; history goes to a `<file>.history.jsonl` beside it.
- `redis` (a redis:// URL): `<prefix>policy:current` holds the active policy as JSON with its
  `version`; `<prefix>policy:history` is a hash version -> record; every write publishes on
  `<prefix>policy:updates`. A watcher thread subscribes and re-reads on each message (and polls
  every `poll_interval_s` as a health check), so replicas reload within a second. Writes are
  compare-and-set under WATCH/MULTI. When Redis is unreachable the store keeps serving the
  last good policy, reconnects with exponential backoff, logs the outage once, and reports it
  in `status()` (`healthy`, `connection_errors_total`, `reconnects_total`, ...).

Every write is validated first; an invalid policy raises `PolicyValidationError` with one
`field: message` line per problem and nothing changes. A rollback writes the old content as a
new version, so history only grows. `current()` is the hot path: for Redis it never does I/O.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import ValidationError

from policies.errors import (
    PolicyError,
    PolicyNotFoundError,
    PolicyStoreUnavailableError,
    PolicyValidationError,
    StaleVersionError,
)
from policies.schema import Policy, flatten_errors

log = logging.getLogger("tandem.policies")

DEFAULT_POLICY_PATH = Path(__file__).resolve().parent / "default.yaml"
SOURCE_ENV = "TANDEM_POLICY_SOURCE"


# --- validation ----------------------------------------------------------------------------------


def validate_policy(data: Policy | dict | str, source: str = "policy") -> Policy:
    """A validated `Policy` from a Policy, a dict, or YAML/JSON text; else `PolicyValidationError`."""
    if isinstance(data, Policy):
        return data
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise PolicyValidationError([f"(yaml): {exc}".replace("\n", " ")], source) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyValidationError([f"(policy): must be a mapping of fields, got {type(data).__name__}"], source)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyValidationError(flatten_errors(exc), source) from None


def read_policy_file(path: str | os.PathLike) -> Policy:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc.strerror or exc}") from None
    return validate_policy(text, str(path))


def default_policy() -> Policy:
    """The shipped default policy (policies/default.yaml)."""
    return read_policy_file(DEFAULT_POLICY_PATH)


@dataclass
class PolicyRecord:
    """One entry of a store's history."""

    version: int  # the version this write created
    policy: dict  # the policy content (without version)
    applied_at: float  # unix seconds
    note: str = ""  # e.g. "rollback to 3"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> PolicyRecord:
        d = json.loads(raw)
        return cls(version=int(d["version"]), policy=d["policy"], applied_at=float(d.get("applied_at", 0.0)), note=d.get("note", ""))


# --- the interface and its registry --------------------------------------------------------------


class PolicyStore(ABC):
    """Where the live policy is read and written. `current()` is cheap and never raises once a
    policy was loaded; `apply`, `history` and `rollback` talk to the backend."""

    name: ClassVar[str]

    @abstractmethod
    def current(self) -> Policy:
        """The active policy (the last good one if the backend is failing)."""

    @abstractmethod
    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "") -> Policy:
        """Validate and write `policy` as the next version. With `expect_version`, refuse
        (`StaleVersionError`) unless that is still the current version. Returns the stored policy."""

    @abstractmethod
    def history(self) -> list[PolicyRecord]:
        """Every stored version, oldest first."""

    def rollback(self, version: int, expect_version: int | None = None) -> Policy:
        """Write the content of an earlier `version` as a new version."""
        for rec in self.history():
            if rec.version == version:
                return self.apply(rec.policy, expect_version=expect_version, note=f"rollback to {version}")
        raise PolicyNotFoundError(f"no policy version {version} in the history of {self.describe()}", param="version")

    def status(self) -> dict[str, Any]:
        return {"store": self.name, "source": self.describe(), "version": self.current().version, "healthy": True}

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


STORES: dict[str, type[PolicyStore]] = {}


def register_store(name: str) -> Callable[[type[PolicyStore]], type[PolicyStore]]:
    def deco(cls: type[PolicyStore]) -> type[PolicyStore]:
        cls.name = name
        STORES[name] = cls
        return cls

    return deco


_URL_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]*@")


def redact(value: Any) -> Any:
    """`value` (a string, or a dict of them, nested) with URL credentials masked
    (redis://:password@host -> redis://***@host): what the admin API and `tandem doctor` show."""
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(r"\1***@", value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


def store_kind(source: str) -> str:
    """Which registered store a source string names: redis:// URLs -> redis, `memory:` -> memory, paths -> file."""
    if source.startswith(("redis://", "rediss://", "unix://")):
        return "redis"
    if source.startswith("memory:"):
        return "memory"
    return "file"


def load_store(source: str | os.PathLike | None = None, **kwargs) -> PolicyStore:
    """A store for `source` (a YAML path or a redis:// URL); default from $TANDEM_POLICY_SOURCE,
    else the shipped policies/default.yaml. Extra keyword arguments go to the store class."""
    source = str(source or os.environ.get(SOURCE_ENV) or DEFAULT_POLICY_PATH)
    kind = store_kind(source)
    if kind not in STORES:
        raise PolicyError(f"no policy store named {kind!r}; registered: {', '.join(sorted(STORES))}")
    if source.startswith("file://"):
        source = source[len("file://") :]
    if kind == "memory":
        return STORES[kind](kwargs.pop("policy", None), **kwargs)
    return STORES[kind](source, **kwargs)


# --- YAML file -----------------------------------------------------------------------------------


@register_store("file")
class FileStore(PolicyStore):
    """A policy in a YAML file, reloaded when the file changes."""

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

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "") -> Policy:
        new = validate_policy(policy)
        with self._locked():
            old = self._on_disk()
            cur = old.version if old is not None else 0
            if expect_version is not None and expect_version != cur:
                raise StaleVersionError(expect_version, cur)
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


# --- Redis ---------------------------------------------------------------------------------------


@register_store("redis")
class RedisStore(PolicyStore):
    """A policy shared through Redis by every replica; see the module docstring."""

    def __init__(
        self,
        url: str,
        prefix: str = "tandem:",
        watch: bool = True,
        bootstrap: Policy | None = None,
        poll_interval_s: float = 2.0,
        socket_timeout_s: float = 1.0,
        backoff_s: tuple[float, float] = (0.1, 5.0),
    ):
        import redis  # heavy-ish; only when a Redis store is built

        self._redis = redis
        self.url = url
        self.prefix = prefix  # key prefix; tests use a unique one each
        self.key_current = f"{prefix}policy:current"
        self.key_history = f"{prefix}policy:history"
        self.channel = f"{prefix}policy:updates"
        self.poll_interval_s = poll_interval_s  # watcher's re-read (and health check) period
        self.backoff_s = backoff_s  # (first, max) wait between reconnect attempts, doubling
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No client-side retries: an outage should surface at once and be handled here.
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._policy: Policy = bootstrap or default_policy()  # served until Redis says otherwise
        self._raw: str | None = None  # the JSON last loaded, to skip no-op reloads
        self._lock = threading.Lock()
        self.healthy = False
        self.last_error: str | None = None
        self.connection_errors_total = 0  # failed Redis calls (reads, writes, the watcher)
        self.reconnects_total = 0  # outages that ended
        self.reloads_total = 0  # policies loaded from Redis
        self.invalid_total = 0  # policies in Redis that failed validation (kept the last good)
        self.listeners: list[Callable[[Policy], None]] = []  # called after each reload
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            self._refresh()
            self._mark_up()
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            self._mark_down(exc)
        if watch:
            self._thread = threading.Thread(target=self._watch, name=f"policy-watch-{prefix}", daemon=True)
            self._thread.start()

    def describe(self) -> str:
        return f"{self.url} (prefix {self.prefix!r})"

    # health bookkeeping
    def _mark_down(self, exc: BaseException) -> None:
        self.connection_errors_total += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.healthy or self.connection_errors_total == 1:
            log.warning(
                "policy store %s unreachable (%s); serving last good policy version %d",
                self.url, self.last_error, self._policy.version,
            )
        self.healthy = False

    def _mark_up(self) -> None:
        if not self.healthy and self.connection_errors_total:
            self.reconnects_total += 1
            log.warning("policy store %s reachable again; policy version %d", self.url, self._policy.version)
        self.healthy = True
        self.last_error = None

    def _refresh(self) -> None:
        """Re-read the current policy from Redis (raises on connection errors)."""
        raw = self.client.get(self.key_current)
        if raw is None or raw == self._raw:
            return  # nothing stored yet (or Redis restarted empty): keep what we serve
        try:
            policy = validate_policy(json.loads(raw), self.key_current)
        except (PolicyValidationError, json.JSONDecodeError) as exc:
            self.invalid_total += 1
            self._raw = raw
            log.error("invalid policy in %s ignored, keeping version %d: %s", self.key_current, self._policy.version, exc)
            return
        self._set(policy, raw)

    def _set(self, policy: Policy, raw: str) -> None:
        with self._lock:
            changed = policy != self._policy
            self._policy, self._raw = policy, raw
            self.reloads_total += 1
        if changed:
            log.info("policy version %d active (from %s)", policy.version, self.key_current)
            for fn in list(self.listeners):
                fn(policy)

    def _watch(self) -> None:
        redis = self._redis
        delay = self.backoff_s[0]
        while not self._stop.is_set():
            pubsub = None
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                self._refresh()  # after subscribing, so no update falls between the two
                self._mark_up()
                delay = self.backoff_s[0]
                last_poll = time.monotonic()
                while not self._stop.is_set():
                    msg = pubsub.get_message(timeout=0.2)
                    if msg is not None or time.monotonic() - last_poll >= self.poll_interval_s:
                        self._refresh()
                        last_poll = time.monotonic()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                self._mark_down(exc)
                self._stop.wait(delay)
                delay = min(delay * 2, self.backoff_s[1])
            except Exception:  # never let the watcher die: keep serving, try again later
                log.exception("policy watcher error")
                self._stop.wait(delay)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        pubsub.close()

    def current(self) -> Policy:
        if self._thread is None:  # not watching (CLI): read through, keep last good on failure
            try:
                self._refresh()
                self._mark_up()
            except (self._redis.ConnectionError, self._redis.TimeoutError, OSError) as exc:
                self._mark_down(exc)
        return self._policy

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            out = fn()
        except (self._redis.ConnectionError, self._redis.TimeoutError, OSError) as exc:
            self._mark_down(exc)
            raise PolicyStoreUnavailableError(f"policy store {self.url} is unreachable: {exc}") from None
        return out

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "") -> Policy:
        new = validate_policy(policy)  # before touching Redis: an invalid policy changes nothing
        redis = self._redis

        def cas() -> tuple[Policy, str]:
            with self.client.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch(self.key_current)
                        raw = pipe.get(self.key_current)
                        cur = int(json.loads(raw)["version"]) if raw else 0
                        if expect_version is not None and expect_version != cur:
                            raise StaleVersionError(expect_version, cur)
                        stored = new.model_copy(update={"version": cur + 1})
                        body = json.dumps({"version": stored.version, **stored.content()}, sort_keys=True)
                        rec = PolicyRecord(stored.version, stored.content(), time.time(), note)
                        pipe.multi()
                        pipe.set(self.key_current, body)
                        pipe.hset(self.key_history, str(stored.version), rec.to_json())
                        pipe.publish(self.channel, json.dumps({"version": stored.version}))
                        pipe.execute()
                        return stored, body
                    except redis.WatchError:
                        continue  # someone wrote in between; re-read and decide again

        stored, body = self._call(cas)
        self._mark_up()
        self._set(stored, body)
        log.info("policy version %d written to %s", stored.version, self.key_current)
        return stored

    def history(self) -> list[PolicyRecord]:
        raw = self._call(lambda: self.client.hgetall(self.key_history))
        return sorted((PolicyRecord.from_json(v) for v in raw.values()), key=lambda r: r.version)

    def rollback(self, version: int, expect_version: int | None = None) -> Policy:
        raw = self._call(lambda: self.client.hget(self.key_history, str(version)))
        if raw is None:
            raise PolicyNotFoundError(f"no policy version {version} in {self.key_history}", param="version")
        rec = PolicyRecord.from_json(raw)
        return self.apply(rec.policy, expect_version=expect_version, note=f"rollback to {version}")

    def status(self) -> dict[str, Any]:
        return {
            "store": self.name,
            "source": self.url,
            "prefix": self.prefix,
            "version": self._policy.version,
            "healthy": self.healthy,
            "last_error": self.last_error,
            "connection_errors_total": self.connection_errors_total,
            "reconnects_total": self.reconnects_total,
            "reloads_total": self.reloads_total,
            "invalid_total": self.invalid_total,
        }

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with contextlib.suppress(Exception):
            self.client.close()


# --- in memory -----------------------------------------------------------------------------------


@register_store("memory")
class MemoryStore(PolicyStore):
    """A policy held in this process only (evaluation, benchmarks, tests of the router's rules).
    Source string `memory:`; starts from the given policy or the shipped default."""

    def __init__(self, source: str | Policy | dict | None = None):
        start = source if isinstance(source, (Policy, dict)) else None
        self._policy = validate_policy(start) if start is not None else default_policy()
        self._history = [PolicyRecord(self._policy.version, self._policy.content(), time.time(), "initial")]

    def describe(self) -> str:
        return "memory:"

    def current(self) -> Policy:
        return self._policy

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "") -> Policy:
        new = validate_policy(policy)
        cur = self._policy.version
        if expect_version is not None and expect_version != cur:
            raise StaleVersionError(expect_version, cur)
        self._policy = new.model_copy(update={"version": cur + 1})
        self._history.append(PolicyRecord(self._policy.version, self._policy.content(), time.time(), note))
        return self._policy

    def history(self) -> list[PolicyRecord]:
        return list(self._history)
