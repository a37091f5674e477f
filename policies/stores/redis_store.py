"""The Redis policy store (`redis`, a redis:// URL): one policy shared by every replica.

The keys, the compare-and-set write, the history and the version mark are
`policies.stores.redis_versions`; this module serves the policy. Every write publishes on
`<prefix>policy:updates`: a watcher thread subscribes and re-reads on each message (and polls
every `poll_interval_s` as a health check), so replicas reload within a second. When Redis is
unreachable the store keeps serving the last good policy, reconnects with exponential backoff,
logs the outage once, and reports it in `status()` (`healthy`, `connection_errors_total`,
`reconnects_total`, ...).

Versions only grow, even across a Redis that restarted empty: the store remembers the highest
version it has served or written (`seen_version`), puts the mark back when Redis holds less (on
its next read: within a poll for a watching replica), and a store that reads a version lower
than one it has served (written before the mark was back) writes that content again as the next
version before serving it, so no replica ever steps back to a lower version. One policy on every
replica: a store that finds no current policy writes back the one it serves, under its own
version, and a lower written-back version gives way to a higher one, so every replica (and a
replacement that started on the shipped default) converges on the highest version any served.

`current()` is the hot path and, while watching, never does I/O. The client has no retries of
its own, so an outage surfaces at once and is handled here. The `redis` library is imported
only when a store is built, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from policies.errors import PolicyNotFoundError, PolicyStoreUnavailableError, PolicyValidationError, StaleVersionError
from policies.schema import Policy
from policies.stores.base import (
    SHIPPED_ROLLBACK_NOTE,
    SHIPPED_VERSION,
    PolicyRecord,
    PolicyStore,
    check_write,
    default_policy,
    recorded_policy,
    redact,
    redis_client,
    resolve_write,
    validate_policy,
)
from policies.stores.redis_versions import WRITTEN_BACK, Build, PolicyVersions

log = logging.getLogger("tandem.policies")


class RedisStore(PolicyStore):
    """A policy shared through Redis by every replica; see the module docstring."""

    name: ClassVar[str] = "redis"

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
        self.shown_url = redact(url)  # what logs, errors and status show: no password
        self.prefix = prefix  # key prefix; tests use a unique one each
        self.poll_interval_s = poll_interval_s  # watcher's re-read (and health check) period
        self.backoff_s = backoff_s  # (first, max) wait between reconnect attempts, doubling
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No client-side retries: an outage should surface at once and be handled here.
        self.client = redis_client(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self.versions = PolicyVersions(self.client, prefix, redis.ResponseError, self.shown_url)
        self.key_current, self.channel = self.versions.key_current, self.versions.channel  # what logs name; what the watcher hears
        self._policy: Policy = bootstrap or default_policy()  # served until Redis says otherwise
        self._raw: str | None = None  # the JSON last loaded, to skip no-op reloads
        self.seen_version = self._policy.version  # the highest version served or written here; never written lower
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
        return f"{self.shown_url} (prefix {self.prefix!r})"

    # health bookkeeping
    def _mark_down(self, exc: BaseException) -> None:
        self.connection_errors_total += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if self.healthy or self.connection_errors_total == 1:
            log.warning(
                "policy store %s unreachable (%s); serving last good policy version %d",
                self.shown_url, self.last_error, self._policy.version,
            )
        self.healthy = False

    def _mark_up(self) -> None:
        if not self.healthy and self.connection_errors_total:
            self.reconnects_total += 1
            log.warning("policy store %s reachable again; policy version %d", self.shown_url, self._policy.version)
        self.healthy = True
        self.last_error = None

    def _refresh(self) -> None:
        """Re-read the current policy from Redis (raises on connection errors)."""
        raw, mark = self.versions.read()
        if self.seen_version > mark:
            self.versions.restore_mark(self.seen_version)  # Redis forgot versions (restarted empty, or from an older snapshot)
        if raw is None:
            self._write_back()  # nothing stored (Redis restarted empty): put back what we serve
            return
        if raw == self._raw:
            return
        try:
            policy = validate_policy(json.loads(raw), self.key_current)
        except (PolicyValidationError, json.JSONDecodeError) as exc:
            self.invalid_total += 1
            self._raw = raw
            log.error("invalid policy in %s ignored, keeping version %d: %s", self.key_current, self._policy.version, exc)
            return
        if policy.version < self.seen_version and self.versions.written_back(policy.version):
            self._write_back()  # another replica put back a lower version than ours: the highest served wins
            return
        if policy.version < self.seen_version:  # written while Redis had forgotten our versions
            renumbered = self._renumber(raw, policy)
            if renumbered is None:
                return  # it changed meanwhile: the next read decides
            policy, raw = renumbered
        self._set(policy, raw)

    def _write_back(self) -> None:
        """Put the policy this store serves back into a Redis that lost it, under its own version
        (`PolicyVersions.write_back`): only a policy that came from the store (never the bootstrap
        default nobody wrote), and only while Redis holds nothing better."""
        if self._raw is None or self._policy.version < 1:
            return
        note = f"{WRITTEN_BACK}: Redis had lost the policy; a replica served version {self._policy.version}"
        try:
            if self.versions.write_back(self._policy, note):
                log.warning("policy store %s had lost the policy; version %d written back", self.shown_url, self._policy.version)
        except self._redis.ResponseError as exc:  # e.g. a read-only user: keep serving, the next read tries again
            log.error("cannot write policy version %d back to %s: %s", self._policy.version, self.key_current, exc)

    def _renumber(self, raw: str, policy: Policy) -> tuple[Policy, str] | None:
        """`policy` (read as `raw`) is lower than a version this store has served: write its content
        again as the next version (unless it changed meanwhile: None)."""
        note = f"version {policy.version} renumbered: Redis had lost versions up to {self.seen_version}"
        out = self._write(lambda now, cur: (policy, note) if now == raw else None)
        if out is not None:
            log.warning("policy %s: %s; it is version %d now", self.key_current, note, out[0].version)
        return out

    def _write(self, build: Build) -> tuple[Policy, str] | None:
        """One compare-and-set write numbered past every version this store has seen (`PolicyVersions.write`)."""
        return self.versions.write(build, self.seen_version)

    def _set(self, policy: Policy, raw: str) -> None:
        with self._lock:
            changed = policy != self._policy
            self._policy, self._raw = policy, raw
            self.seen_version = max(self.seen_version, policy.version)
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
            raise PolicyStoreUnavailableError(f"policy store {self.shown_url} is unreachable: {exc}") from None
        return out

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "", *,
              patch: bool = False) -> Policy:
        checked = check_write(policy, patch)  # before touching Redis: an invalid policy changes nothing

        def build(raw: str | None, cur: int) -> tuple[Policy, str]:
            if expect_version is not None and expect_version != cur:
                raise StaleVersionError(expect_version, cur)
            if isinstance(checked, Policy):
                return checked, note
            current = validate_policy(json.loads(raw), self.key_current) if raw else self._policy
            return resolve_write(checked, current), note  # the patch over what is stored now

        stored, body = self._call(lambda: self._write(build))
        self._mark_up()
        self._set(stored, body)
        log.info("policy version %d written to %s", stored.version, self.key_current)
        return stored

    def history(self) -> list[PolicyRecord]:
        return self._call(self.versions.history)

    def rollback(self, version: int, expect_version: int | None = None) -> Policy:
        record = self._call(lambda: self.versions.record(version))
        if record is None and version == SHIPPED_VERSION:
            return self.apply(default_policy(), expect_version=expect_version, note=SHIPPED_ROLLBACK_NOTE)
        if record is None:
            raise PolicyNotFoundError(f"no policy version {version} in {self.versions.key_history}", param="version")
        return self.apply(recorded_policy(record), expect_version=expect_version, note=f"rollback to {version}")

    def status(self) -> dict[str, Any]:
        return {
            "store": self.name,
            "source": self.shown_url,
            "prefix": self.prefix,
            "version": self._policy.version,
            "seen_version": self.seen_version,
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
