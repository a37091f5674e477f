"""What every policy store shares (policies.stores.base): validation that lists every error, a write
that is a complete policy or an explicit patch (JSON Merge Patch over the current one), history
records that round trip, credentials masked in what is shown, and the Redis password by environment."""

from __future__ import annotations

import pytest

from policies.errors import PolicyValidationError
from policies.stores.base import (
    PolicyRecord,
    check_write,
    default_policy,
    merge_patch,
    recorded_policy,
    redact,
    redis_client,
    resolve_write,
    validate_policy,
)


def errors_of(call) -> list[str]:
    with pytest.raises(PolicyValidationError) as refused:
        call()
    return refused.value.errors


def test_text_dicts_and_policies_validate_alike_and_bad_ones_name_their_fields():
    policy = default_policy()
    assert validate_policy(policy.model_dump(mode="json")) == policy == validate_policy(policy)
    assert any("yaml" in e for e in errors_of(lambda: validate_policy("steps: [1,")))
    assert any("mapping" in e for e in errors_of(lambda: validate_policy("- a list")))
    assert any(e.startswith("steps") for e in errors_of(lambda: validate_policy({"steps": "many"})))


def test_a_full_write_states_every_field_and_a_patch_only_what_changes():
    assert any("missing" in e for e in errors_of(lambda: check_write({"steps": 16})))  # a partial policy is no write
    patch = check_write({"steps": 16}, patch=True)
    current = default_policy()
    assert resolve_write(patch, current).steps == 16 and resolve_write(patch, current).content() != current.content()
    assert any("version" in e for e in errors_of(lambda: check_write({"version": 9}, patch=True)))
    assert any("empty mapping" in e for e in errors_of(lambda: check_write({}, patch=True)))
    assert any("no current policy" in e for e in errors_of(lambda: resolve_write(patch, None)))


def test_a_patch_merges_key_by_key_and_null_removes():
    target = {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": 3}
    assert merge_patch(target, {"a": {"y": None, "z": 4}, "b": [3], "c": None}) == {"a": {"x": 1, "z": 4}, "b": [3]}
    assert target == {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": 3}  # the current policy is not changed in place


def test_a_history_record_round_trips_and_rolls_back_to_its_policy():
    policy = default_policy()
    record = PolicyRecord(4, policy.content(), 1.5, "rollback to 2")
    assert PolicyRecord.from_json(record.to_json()) == record
    assert recorded_policy(record).content() == policy.content()


def test_credentials_are_masked_wherever_they_are_nested():
    shown = redact({"source": "redis://:s3cret@db:6379/0", "nested": {"url": "redis://user:pw@h/1"}, "n": 3})
    assert shown == {"source": "redis://***@db:6379/0", "nested": {"url": "redis://***@h/1"}, "n": 3}


def test_a_url_without_a_password_takes_it_from_the_environment(monkeypatch):
    monkeypatch.setenv("TANDEM_REDIS_PASSWORD", "from-env")
    assert redis_client("redis://127.0.0.1:1/0").connection_pool.connection_kwargs["password"] == "from-env"
    assert redis_client("redis://:in-url@127.0.0.1:1/0").connection_pool.connection_kwargs["password"] == "in-url"
