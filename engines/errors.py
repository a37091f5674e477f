"""Every error Tandem answers with, in one shape.

`TandemError` carries what a client is told: the HTTP `status`, OpenAI's error `type` and a
`code` (class attributes; an instance may name a more precise code), the request `param` at
fault and any response `headers` (Retry-After, WWW-Authenticate). Packages raise subclasses
of the families below; only the gateway turns them into responses, with one handler.

Errors pickle with their fields, so an engine replica can hand one to the gateway as a value
across a Ray Serve handle.
"""

from __future__ import annotations


class TandemError(Exception):
    status: int = 500
    type: str = "server_error"
    code: str = "internal_error"

    def __init__(self, message: str, param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict:
        """OpenAI's error body."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def __reduce__(self):
        return _restore, (type(self), self.message, self.__dict__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.code!r}, {self.message!r}, param={self.param!r})"


def _restore(cls: type[TandemError], message: str, state: dict) -> TandemError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# ---- families, by HTTP status -----------------------------------------------------------------------


class InvalidRequestError(TandemError, ValueError):
    """The request can never succeed as sent (bad field, bad sampling value, empty prompt, ...)."""

    status, type, code = 400, "invalid_request_error", "invalid_request"


class PermissionDeniedError(TandemError):
    """Well-formed, but the policy does not allow it."""

    status, type, code = 403, "permission_error", "permission_denied"


class NotFoundError(TandemError, LookupError):
    status, type, code = 404, "invalid_request_error", "not_found"


class ConflictError(TandemError):
    status, type, code = 409, "invalid_request_error", "conflict"


class RateLimitError(TandemError):
    status, type, code = 429, "rate_limit_error", "rate_limited"

    def __init__(self, message: str, retry_after_s: float = 1.0, **kw):
        super().__init__(message, **kw)
        self.retry_after_s = retry_after_s
        self.headers.setdefault("Retry-After", str(max(1, round(retry_after_s))))


class ServiceUnavailableError(TandemError):
    """A part is down or timed out; the caller may degrade to another mode."""

    status, type, code = 503, "server_error", "service_unavailable"


# ---- the engine's errors ----------------------------------------------------------------------------


class ContextLengthError(InvalidRequestError):
    """Prompt (plus the room the answer needs) does not fit the model's context."""

    code = "context_length_exceeded"


class CheckpointError(TandemError):
    """A checkpoint directory is missing, incomplete or not a DiffusionGemma."""

    code = "checkpoint_error"


class EngineOverloadedError(RateLimitError):
    """The scheduler's queue is full; the client should retry later."""

    code = "engine_overloaded"


class EngineUnavailableError(ServiceUnavailableError):
    """The engine failed or timed out."""

    code = "engine_unavailable"
