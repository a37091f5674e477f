"""Policy writes state what they mean: a full policy must name every field (an empty or partial
one is refused with the missing fields listed, never filled with schema defaults), and a change
of only some fields is an explicit patch, laid over the current policy under the store's lock.
Against every store kind: memory, a YAML file, a real Redis."""

from __future__ import annotations

import json

import pytest
import yaml

from policies import PolicyValidationError, StaleVersionError
from policies.schema import OPTIONAL_ON_WRITE, Policy, missing_fields
from policies.stores import DEFAULT_POLICY_PATH, FileStore, MemoryStore, RedisStore, default_policy, merge_patch
from tests.policies.helpers import redis_client

ROUTING_FIELDS = sorted(set(Policy.model_fields) - OPTIONAL_ON_WRITE)


@pytest.fixture(params=["memory", "file", "redis"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "file":
        f = tmp_path / "policy.yaml"
        f.write_text(yaml.safe_dump(default_policy().model_dump(mode="json"), sort_keys=False))
        yield FileStore(f, check_interval_s=0)
    else:
        redis_url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("prefix")
        s = RedisStore(redis_url, prefix=prefix, watch=False)
        yield s
        s.close()


def refused(store, data, **kw) -> list[str]:
    before = (store.current(), [r.version for r in store.history()])
    with pytest.raises(PolicyValidationError) as exc:
        store.apply(data, **kw)
    assert exc.value.status == 400 and exc.value.code == "invalid_policy"
    assert (store.current(), [r.version for r in store.history()]) == before, "a refused write changed something"
    return exc.value.errors


def missing(errors: list[str]) -> set[str]:
    return {e.split(":")[0] for e in errors if e.endswith(": missing") or ": missing:" in e}


# --- a full policy states every field -------------------------------------------------------------


def test_missing_fields_of_the_shipped_and_schema_policies_is_empty():
    assert missing_fields(yaml.safe_load(DEFAULT_POLICY_PATH.read_text())) == []
    assert missing_fields(Policy().content()) == []  # content() drops only the version, which is optional
    assert set(missing_fields({})) == set(ROUTING_FIELDS)
    assert missing_fields({**Policy().content(), "forcing": {"header": "x-mode"}}) == [
        f"forcing.{f}" for f in Policy.model_fields["forcing"].annotation.model_fields if f != "header"]


@pytest.mark.parametrize("empty", [{}, "", "{}\n", "# only a comment\n"])
def test_an_empty_policy_is_refused_listing_every_field(store, empty):
    """Once, `{}` (or an empty file) was written as a new version holding the schema defaults:
    block for extract, one canvas, no shadow verification; every replica served it."""
    errors = refused(store, empty)
    assert missing(errors) == set(ROUTING_FIELDS)
    assert "patch" in errors[0]  # says how to change only some fields


def test_a_partial_policy_is_refused_listing_what_it_leaves_out(store):
    errors = refused(store, {"steps": 16, "confidence_floor": 0.7})
    assert missing(errors) == set(ROUTING_FIELDS) - {"steps", "confidence_floor"}


def test_a_partial_nested_block_is_refused_too(store):
    content = store.current().content()
    errors = refused(store, {**content, "load_aware": {"enabled": False}})
    assert missing(errors) == {f"load_aware.{f}" for f in ("max_queue_ratio", "spill_order", "cost_aware", "min_gain", "equal_quality_tasks")}


def test_missing_and_invalid_fields_are_reported_together(store):
    content = store.current().content()
    del content["long_mode"]
    errors = refused(store, {**content, "steps": 0})
    assert missing(errors) == {"long_mode"} and any(e.startswith("steps: ") for e in errors)


def test_a_full_policy_may_leave_out_version_and_description(store):
    content = store.current().content()
    del content["description"]
    stored = store.apply({**content, "steps": 20})
    assert stored.version == 1 and stored.steps == 20 and stored.description == ""


def test_an_api_key_entry_names_only_its_overrides(store):
    stored = store.apply({**store.current().content(), "api_keys": {"team-a": {"force_mode": "ar"}}})
    assert stored.api_keys["team-a"].force_mode == "ar" and stored.api_keys["team-a"].allow_forcing is None


# --- a patch says it is one -------------------------------------------------------------------------


def test_merge_patch_follows_rfc_7396():
    target = {"a": 1, "m": {"x": 1, "y": 2}, "l": [1, 2]}
    assert merge_patch(target, {"a": 2, "m": {"y": None, "z": 3}, "l": [3]}) == {"a": 2, "m": {"x": 1, "z": 3}, "l": [3]}
    assert target == {"a": 1, "m": {"x": 1, "y": 2}, "l": [1, 2]}, "the target is not changed in place"


def test_a_patch_changes_only_what_it_names(store):
    before = store.current()
    stored = store.apply({"confidence_floor": 0.7, "task_modes": {"extract": "ar"}, "load_aware": {"min_gain": 2.0}},
                         patch=True, note="stricter")
    assert stored.version == before.version + 1
    assert stored.confidence_floor == 0.7 and stored.task_modes == {**before.task_modes, "extract": "ar"}
    assert stored.load_aware == before.load_aware.model_copy(update={"min_gain": 2.0})
    assert stored.content() == {**before.content(), "confidence_floor": 0.7, "task_modes": stored.task_modes,
                                "load_aware": stored.load_aware.model_dump(mode="json")}
    assert store.current() == stored and store.history()[-1].note == "stricter"


def test_a_patch_null_removes_a_map_entry(store):
    store.apply({"api_keys": {"team-a": {"force_mode": "ar"}, "team-b": {"force_mode": "block"}}}, patch=True)
    stored = store.apply({"api_keys": {"team-a": None}}, patch=True)
    assert set(stored.api_keys) == {"team-b"}


def test_a_patch_honours_expect_version(store):
    store.apply({"steps": 16}, patch=True)
    with pytest.raises(StaleVersionError):
        store.apply({"steps": 4}, patch=True, expect_version=0)
    assert store.current().steps == 16
    assert store.apply({"steps": 4}, patch=True, expect_version=1).steps == 4


@pytest.mark.parametrize("patch, words", [
    ({}, ["(patch)", "mapping of the fields"]),
    ([1, 2], ["(patch)", "got list"]),
    ({"version": 9, "steps": 3}, ["version:", "expect_version"]),
    ({"steps": None}, ["steps: missing", "null"]),
    ({"steps": 0}, ["steps: ", "greater than or equal to 1"]),
    ({"colour": "red"}, ["colour: ", "Extra inputs"]),
    ({"forcing": {"allowed_modes": ["warp"]}}, ["forcing.allowed_modes.0"]),
])
def test_a_bad_patch_is_refused_and_nothing_changes(store, patch, words):
    errors = refused(store, patch, patch=True)
    text = "\n".join(errors)
    assert all(w in text for w in words), errors


def test_a_patch_is_laid_over_the_policy_stored_at_write_time(redis_url, prefix):
    """Two replicas: the second patches after the first wrote, without re-reading: the first's
    change stays (the patch is merged under the compare-and-set, not over a stale copy)."""
    a = RedisStore(redis_url, prefix=prefix, watch=False)
    b = RedisStore(redis_url, prefix=prefix, watch=False)
    try:
        assert b.current().steps == 12  # b has read version 0
        a.apply({"steps": 16}, patch=True)
        stored = b.apply({"confidence_floor": 0.9}, patch=True)
        assert (stored.version, stored.steps, stored.confidence_floor) == (2, 16, 0.9)
    finally:
        a.close()
        b.close()


def test_rollback_to_a_record_older_than_a_field_still_works(redis_url, prefix):
    """A record written before a field existed lacks it; a rollback is the store's own content,
    so the field takes its default instead of refusing the rollback."""
    s = RedisStore(redis_url, prefix=prefix, watch=False)
    try:
        s.apply({"steps": 16}, patch=True)
        old = {k: v for k, v in s.current().content().items() if k != "on_engine_failure"}
        client = redis_client()
        client.hset(f"{prefix}policy:history", "1", json.dumps({"version": 1, "policy": old, "applied_at": 0.0, "note": ""}))
        client.close()
        back = s.rollback(1)
        assert back.version == 2 and back.steps == 16 and back.on_engine_failure == Policy().on_engine_failure
    finally:
        s.close()
