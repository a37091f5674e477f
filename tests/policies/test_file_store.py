"""The YAML file store: versioned writes, compare-and-set, history, rollback, reload on change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policies import FileStore, PolicyValidationError, StaleVersionError, load_store
from policies.errors import PolicyNotFoundError
from policies.stores import STORES, MemoryStore, RedisStore, default_policy


@pytest.fixture
def policy_file(tmp_path):
    f = tmp_path / "policy.yaml"
    f.write_text(yaml.safe_dump(default_policy().model_dump(mode="json"), sort_keys=False))
    return f


def test_registry_builds_the_store_the_source_names(policy_file, redis_url, prefix):
    assert set(STORES) >= {"file", "redis", "memory"}
    assert isinstance(load_store(policy_file), FileStore)
    assert isinstance(load_store("memory:"), MemoryStore)
    store = load_store(redis_url, prefix=prefix, watch=False)
    try:
        assert isinstance(store, RedisStore)
    finally:
        store.close()


@pytest.mark.parametrize("first", ["policies.stores", "policies.stores.base", "policies.stores.file_store",
                                   "policies.stores.redis_store", "policies.stores.memory_store"])
def test_any_store_module_imports_first_without_a_cycle_or_the_redis_library(first):
    """The registry holds every store whichever module a process imports first, and importing
    the stores does not load `redis` (only building a Redis store does)."""
    code = (f"import sys, {first}; from policies.stores import STORES, RedisStore; "
            "assert set(STORES) == {'file', 'redis', 'memory'} and STORES['redis'] is RedisStore, STORES; "
            "assert 'redis' not in sys.modules")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_default_source_comes_from_env(policy_file, monkeypatch):
    monkeypatch.setenv("TANDEM_POLICY_SOURCE", str(policy_file))
    assert load_store().path == policy_file


def test_apply_writes_next_version_and_history(policy_file):
    store = FileStore(policy_file, check_interval_s=0)
    assert store.current().version == 0
    new = store.apply({**store.current().content(), "steps": 20}, expect_version=0, note="more steps")
    assert new.version == 1 and new.steps == 20
    assert yaml.safe_load(policy_file.read_text())["version"] == 1
    assert FileStore(policy_file).current() == new  # another reader sees it
    hist = store.history()
    assert [r.version for r in hist] == [0, 1]
    assert hist[1].note == "more steps" and hist[0].policy["steps"] == 12


def test_stale_expected_version_is_refused_and_nothing_changes(policy_file):
    a, b = FileStore(policy_file, check_interval_s=0), FileStore(policy_file, check_interval_s=0)
    a.apply({**a.current().content(), "steps": 16}, expect_version=0)
    before = policy_file.read_bytes()
    with pytest.raises(StaleVersionError) as exc:
        b.apply({**b.current().content(), "steps": 4}, expect_version=0)
    assert (exc.value.expected, exc.value.actual, exc.value.status) == (0, 1, 409)
    assert policy_file.read_bytes() == before


def test_invalid_policy_is_refused_and_nothing_changes(policy_file):
    store = FileStore(policy_file, check_interval_s=0)
    before = policy_file.read_bytes()
    with pytest.raises(PolicyValidationError) as exc:
        store.apply({"steps": -1, "task_modes": {"extract": "nope"}})
    assert any(e.startswith("steps:") for e in exc.value.errors)
    assert policy_file.read_bytes() == before and store.current().version == 0
    assert not store.history_path.exists()


def test_rollback_writes_old_content_as_a_new_version(policy_file):
    store = FileStore(policy_file, check_interval_s=0)
    store.apply({**store.current().content(), "steps": 20})
    store.apply({**store.current().content(), "steps": 30})
    back = store.rollback(1)
    assert back.version == 3 and back.steps == 20
    assert store.rollback(0).steps == 12
    with pytest.raises(PolicyNotFoundError):
        store.rollback(42)


def test_external_edit_is_picked_up_on_access(policy_file):
    store = FileStore(policy_file, check_interval_s=0)
    data = yaml.safe_load(policy_file.read_text())
    data.update(version=7, steps=9)
    policy_file.write_text(yaml.safe_dump(data))
    os.utime(policy_file, ns=(1, 2))  # a different mtime even within the same clock tick
    assert store.current().version == 7 and store.current().steps == 9


def test_broken_edit_keeps_the_last_good_policy_and_reports_it(policy_file):
    store = FileStore(policy_file, check_interval_s=0)
    policy_file.write_text("steps: nope\ncanvas_sizes: [3, 1]\n")
    p = store.current()
    assert p.version == 0 and p.steps == 12
    st = store.status()
    assert st["healthy"] is False and st["invalid_total"] == 1 and "steps" in st["last_error"]


def test_missing_file_has_no_policy_until_one_is_applied(tmp_path):
    from policies.errors import PolicyError

    store = FileStore(tmp_path / "new.yaml", check_interval_s=0)
    with pytest.raises(PolicyError):
        store.current()
    assert store.apply(default_policy()).version == 1
    assert store.current().version == 1
