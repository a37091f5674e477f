"""Domain errors of the router. Each carries the HTTP status, an OpenAI-style error code and the
request parameter at fault; only the gateway turns them into responses."""

from __future__ import annotations


class RouterError(Exception):
    """A request the router refuses. `status` is 400 (malformed: unknown model, bad header value,
    conflicting forced modes) or 403 (well-formed but the policy does not allow it)."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param

    @property
    def type(self) -> str:
        return "invalid_request_error" if self.status == 400 else "permission_error"

    def to_dict(self) -> dict:
        """OpenAI's error body."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def __repr__(self) -> str:
        return f"RouterError({self.status}, {self.code!r}, {self.message!r}, param={self.param!r})"
