"""What every policy store shares: validation, writes (full or patch), the history record, and
the `PolicyStore` contract.

Every write is validated first (`validate_policy`); an invalid policy raises
`PolicyValidationError` with one `field: message` line per problem and nothing changes. A write
is either a full policy, which must state every field (`policies.schema.missing_fields`: an
empty or partial file is refused, never filled with schema defaults), or a patch that says it is
one: a JSON merge patch (RFC 7396) laid over the current policy under the store's lock
(`check_write` before the backend is touched, `resolve_write` under the lock). A store keeps its
history as `PolicyRecord`s, and a rollback writes the old content as a new version, so history
only grows. This module imports no store and no backend library, so the stores and the registry
(`policies.stores`) can all import it without a cycle.
"""

from __future__ import annotations

import json
import os
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import ValidationError

from policies.errors import PolicyError, PolicyNotFoundError, PolicyValidationError
from policies.schema import Policy, flatten_errors, missing_fields

DEFAULT_POLICY_PATH = Path(__file__).resolve().parents[1] / "default.yaml"  # policies/default.yaml


# --- validation ----------------------------------------------------------------------------------


def _parse(data: Any, source: str) -> Any:
    """YAML/JSON text parsed; anything else as given."""
    if isinstance(data, str):
        try:
            return yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise PolicyValidationError([f"(yaml): {exc}".replace("\n", " ")], source) from None
    return data


def validate_policy(data: Policy | dict | str, source: str = "policy", complete: bool = False) -> Policy:
    """A validated `Policy` from a Policy, a dict, or YAML/JSON text; else `PolicyValidationError`.
    With `complete` (every write), a mapping must also state every field (`missing_fields`): each
    one left out is an error, reported with the rest. A `Policy` object is complete by construction."""
    if isinstance(data, Policy):
        return data
    data = _parse(data, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyValidationError([f"(policy): must be a mapping of fields, got {type(data).__name__}"], source)
    errors = []
    if complete and (missing := missing_fields(data)):
        errors.append(f"(policy): {len(missing)} field(s) missing: a full policy states every field but version and "
                      "description; to change only some, send them as a patch (`tandem policy apply --patch`, "
                      "or {\"patch\": {...}} on the admin API)")
        errors += [f"{name}: missing" for name in missing]
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        errors += flatten_errors(exc)
    if errors:
        raise PolicyValidationError(errors, source)
    return policy


def read_policy_file(path: str | os.PathLike) -> Policy:
    """The validated policy in a YAML file (a field left out takes its default: this is a read; a
    write checks the file with `check_write`); `PolicyError` if unreadable, `PolicyValidationError` if invalid."""
    return validate_policy(read_text(path), str(path))


def read_text(path: str | os.PathLike) -> str:
    """A policy or patch file's text; `PolicyError` if unreadable."""
    path = Path(path)
    try:
        return path.read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc.strerror or exc}") from None


# Version 0 is the shipped default (policies/default.yaml), served before anything is written: no
# store's history holds it, yet a rollback to 0 restores it (as a new version, like every rollback).
SHIPPED_VERSION = 0
SHIPPED_ROLLBACK_NOTE = "rollback to 0 (the shipped default)"


def default_policy() -> Policy:
    """The shipped default policy (policies/default.yaml)."""
    return read_policy_file(DEFAULT_POLICY_PATH)


# --- writes: a full policy or a patch ------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` laid over it, by JSON Merge Patch (RFC 7396): a mapping merges key by
    key, recursively; null removes a key; anything else (a list, a scalar) replaces the value."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def check_write(data: Policy | dict | str, patch: bool = False, source: str = "policy") -> Policy | dict:
    """What a write asks for, checked before any backend is touched: a full policy, validated and
    complete (a `Policy`), or a patch (a non-empty mapping without `version`, returned as a dict;
    it is validated once laid over the current policy, by `resolve_write`)."""
    if not patch:
        return validate_policy(data, source, complete=True)
    data = _parse(data.content() if isinstance(data, Policy) else data, source)
    if not isinstance(data, dict) or not data:
        got = "an empty mapping" if isinstance(data, dict) else type(data).__name__
        raise PolicyValidationError([f"(patch): must be a mapping of the fields to change, e.g. {{steps: 16}}; got {got}"], source)
    if "version" in data:
        raise PolicyValidationError(["version: a patch cannot set the version (the store assigns it); "
                                     "name the version it applies to with expect_version"], source)
    return data


def resolve_write(checked: Policy | dict, current: Policy | None, source: str = "patch") -> Policy:
    """The policy a write stores, given the current one (read under the store's lock): a full
    policy as it is; a patch laid over `current` and validated (a null that removes a required
    field is refused as missing)."""
    if isinstance(checked, Policy):
        return checked
    if current is None:
        raise PolicyValidationError(["(patch): there is no current policy to patch; apply a full policy first"], source)
    merged = merge_patch(current.content(), checked)
    errors = [f"{name}: missing: a null in a patch removes the field, and a policy needs it" for name in missing_fields(merged)]
    try:
        policy = validate_policy(merged, source)
    except PolicyValidationError as exc:
        errors += exc.errors
    if errors:
        raise PolicyValidationError(errors, source)
    return policy


# --- history -------------------------------------------------------------------------------------


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


def recorded_policy(rec: PolicyRecord) -> Policy:
    """A history record's policy, to roll back to. The store wrote it whole; a field added to the
    schema since then takes its default (the one place a write fills a default in)."""
    return validate_policy(rec.policy, f"policy version {rec.version}")


# --- the interface -------------------------------------------------------------------------------


class PolicyStore(ABC):
    """Where the live policy is read and written. `current()` is cheap and never raises once a
    policy was loaded; `apply`, `history` and `rollback` talk to the backend."""

    name: ClassVar[str]  # the registry name (`policies.stores.STORES`), e.g. "file"

    @abstractmethod
    def current(self) -> Policy:
        """The active policy (the last good one if the backend is failing)."""

    @abstractmethod
    def apply(self, policy: Policy | dict | str, expect_version: int | None = None, note: str = "", *,
              patch: bool = False) -> Policy:
        """Validate and write `policy` as the next version: a full policy (every field stated, see
        `check_write`), or with `patch` a merge patch laid over the current policy under the
        store's lock. With `expect_version`, refuse (`StaleVersionError`) unless that is still the
        current version. Versions only grow. Returns the stored policy."""

    @abstractmethod
    def history(self) -> list[PolicyRecord]:
        """Every stored version, oldest first."""

    def rollback(self, version: int, expect_version: int | None = None) -> Policy:
        """Write the content of an earlier `version` as a new version (0: the shipped default)."""
        for rec in self.history():
            if rec.version == version:
                return self.apply(recorded_policy(rec), expect_version=expect_version, note=f"rollback to {version}")
        if version == SHIPPED_VERSION:
            return self.apply(default_policy(), expect_version=expect_version, note=SHIPPED_ROLLBACK_NOTE)
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


_URL_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]*@")


def redact(value: Any) -> Any:
    """`value` (a string, or a dict of them, nested) with URL credentials masked
    (redis://:password@host -> redis://***@host): what the admin API and `tandem doctor` show."""
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(r"\1***@", value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


REDIS_PASSWORD_ENV = "TANDEM_REDIS_PASSWORD"


def redis_client(url: str, **options):
    """A redis-py client for `url`. A URL without a password takes it from $TANDEM_REDIS_PASSWORD:
    a password written into a URL in serve_config.yaml's args is printed by Ray when it deploys the
    app, while the environment of `ray start` is not. Every Redis client of Tandem comes from here."""
    import redis

    password = os.environ.get(REDIS_PASSWORD_ENV)
    if password and "password" not in options and not redis.connection.parse_url(url).get("password"):
        options["password"] = password
    return redis.Redis.from_url(url, **options)
