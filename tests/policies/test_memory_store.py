"""The in-memory policy store (policies.stores.memory_store): versioned writes with compare-and-set,
patches, history and rollback, in one process; a store of its own per instance."""

from __future__ import annotations

import pytest

from policies.errors import PolicyValidationError, StaleVersionError
from policies.stores import MemoryStore, default_policy


def test_it_starts_from_the_default_or_the_policy_given():
    assert MemoryStore().current() == default_policy()
    given = default_policy().content() | {"steps": 12}
    store = MemoryStore(given)
    assert store.current().steps == 12 and store.describe() == "memory:" and [r.note for r in store.history()] == ["initial"]


def test_writes_are_versioned_compared_and_kept_in_history():
    store = MemoryStore()
    start = store.current().version
    assert store.apply({"steps": 20}, patch=True, note="faster").version == start + 1
    with pytest.raises(StaleVersionError):
        store.apply({"steps": 24}, expect_version=start, patch=True)
    with pytest.raises(PolicyValidationError):
        store.apply({"steps": "many"}, patch=True)
    assert store.current().steps == 20 and [r.version for r in store.history()] == [start, start + 1]


def test_a_rollback_is_a_new_version_with_the_old_content():
    store = MemoryStore()
    start = store.current()
    store.apply({"steps": 20}, patch=True)
    back = store.rollback(start.version)
    assert back.version == start.version + 2 and back.content() == start.content()
    assert store.history()[-1].note == f"rollback to {start.version}"
    assert MemoryStore().current().version == start.version  # another instance never saw these writes
