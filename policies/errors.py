"""Errors of the policy stores. Each carries the HTTP status and error code an admin endpoint
would answer with; nothing here knows about HTTP responses."""

from __future__ import annotations


class PolicyError(Exception):
    status: int = 500
    code: str = "policy_error"

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


class PolicyValidationError(PolicyError, ValueError):
    """A policy failed validation; `errors` holds one `field: message` line per problem. Nothing was written."""

    status = 400
    code = "invalid_policy"

    def __init__(self, errors: list[str], source: str = "policy"):
        self.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{source} is invalid ({len(self.errors)} error(s)):\n{lines}")


class StaleVersionError(PolicyError):
    """Compare-and-set refused: the caller expected a version that is no longer current."""

    status = 409
    code = "stale_policy_version"

    def __init__(self, expected: int, actual: int):
        self.expected, self.actual = expected, actual
        super().__init__(f"expected policy version {expected} but the current version is {actual}; re-read and retry")


class PolicyNotFoundError(PolicyError, LookupError):
    """Rollback to a version the history does not hold."""

    status = 404
    code = "policy_version_not_found"


class PolicyStoreUnavailableError(PolicyError):
    """The store's backend (Redis) is unreachable; reads keep the last good policy, writes fail."""

    status = 503
    code = "policy_store_unavailable"
