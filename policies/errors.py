"""Errors of the policy stores, in Tandem's one error shape (`engines.errors.TandemError`): each
carries the HTTP status and code an admin endpoint answers with; nothing here knows about HTTP."""

from __future__ import annotations

from engines.errors import ConflictError, InvalidRequestError, NotFoundError, ServiceUnavailableError, TandemError


class PolicyError(TandemError):
    """Any policy store failure (an unreadable file, an unknown store kind: 500)."""

    code = "policy_error"


class PolicyValidationError(PolicyError, InvalidRequestError):
    """A policy failed validation; `errors` holds one `field: message` line per problem. Nothing was written."""

    code = "invalid_policy"

    def __init__(self, errors: list[str], source: str = "policy"):
        self.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{source} is invalid ({len(self.errors)} error(s)):\n{lines}", param="policy")


class StaleVersionError(PolicyError, ConflictError):
    """Compare-and-set refused: the caller expected a version that is no longer current."""

    code = "stale_policy_version"

    def __init__(self, expected: int, actual: int):
        self.expected, self.actual = expected, actual
        super().__init__(f"expected policy version {expected} but the current version is {actual}; re-read and retry",
                         param="expect_version")


class PolicyNotFoundError(PolicyError, NotFoundError):
    """Rollback to a version the history does not hold."""

    code = "policy_version_not_found"


class PolicyStoreUnavailableError(PolicyError, ServiceUnavailableError):
    """The store's backend (Redis) is unreachable; reads keep the last good policy, writes fail."""

    code = "policy_store_unavailable"
