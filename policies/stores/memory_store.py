"""The in-memory policy store (`memory:`): one process only, for evaluation, benchmarks and tests
of the router's rules. It versions and keeps history like the shared stores, but nothing
outlives the process and no other process sees a write."""

from __future__ import annotations

import time
from typing import ClassVar

from policies.errors import StaleVersionError
from policies.schema import Policy
from policies.stores.base import PolicyRecord, PolicyStore, check_write, default_policy, resolve_write, validate_policy


class MemoryStore(PolicyStore):
    """A policy held in this process only. Source string `memory:`; starts from the given policy
    or the shipped default."""

    name: ClassVar[str] = "memory"

    def __init__(self, source: str | Policy | dict | None = None):
        start = source if isinstance(source, (Policy, dict)) else None
        self._policy = validate_policy(start) if start is not None else default_policy()
        self._history = [PolicyRecord(self._policy.version, self._policy.content(), time.time(), "initial")]

    def describe(self) -> str:
        return "memory:"

    def current(self) -> Policy:
        return self._policy

    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "", *,
              patch: bool = False) -> Policy:
        checked = check_write(policy, patch)
        cur = self._policy.version
        if expect_version is not None and expect_version != cur:
            raise StaleVersionError(expect_version, cur)
        new = resolve_write(checked, self._policy)
        self._policy = new.model_copy(update={"version": cur + 1})
        self._history.append(PolicyRecord(self._policy.version, self._policy.content(), time.time(), note))
        return self._policy

    def history(self) -> list[PolicyRecord]:
        return list(self._history)
