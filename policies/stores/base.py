"""What every policy store shares: validation, the history record, and the `PolicyStore` contract.

Every write is validated first (`validate_policy`); an invalid policy raises
`PolicyValidationError` with one `field: message` line per problem and nothing changes. A store
keeps its history as `PolicyRecord`s, and a rollback writes the old content as a new version, so
history only grows. This module imports no store and no backend library, so the stores and the
registry (`policies.stores`) can all import it without a cycle.
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
from policies.schema import Policy, flatten_errors

DEFAULT_POLICY_PATH = Path(__file__).resolve().parents[1] / "default.yaml"  # policies/default.yaml


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
    """The validated policy in a YAML file; `PolicyError` if unreadable, `PolicyValidationError` if invalid."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc.strerror or exc}") from None
    return validate_policy(text, str(path))


def default_policy() -> Policy:
    """The shipped default policy (policies/default.yaml)."""
    return read_policy_file(DEFAULT_POLICY_PATH)


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


# --- the interface -------------------------------------------------------------------------------


class PolicyStore(ABC):
    """Where the live policy is read and written. `current()` is cheap and never raises once a
    policy was loaded; `apply`, `history` and `rollback` talk to the backend."""

    name: ClassVar[str]  # the registry name (`policies.stores.STORES`), e.g. "file"

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


_URL_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]*@")


def redact(value: Any) -> Any:
    """`value` (a string, or a dict of them, nested) with URL credentials masked
    (redis://:password@host -> redis://***@host): what the admin API and `tandem doctor` show."""
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(r"\1***@", value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value
