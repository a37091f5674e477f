"""Domain errors of the engine side. Each carries the HTTP status and OpenAI error code the
gateway turns it into; nothing here knows about HTTP responses."""

from __future__ import annotations


class EngineError(Exception):
    status: int = 500
    code: str = "engine_error"
    type: str = "server_error"

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequestError(EngineError, ValueError):
    """The request can never succeed as sent (bad sampling value, empty prompt, ...)."""

    status = 400
    code = "invalid_request"
    type = "invalid_request_error"


class ContextLengthError(InvalidRequestError):
    """Prompt (plus the room the answer needs) does not fit the model's context."""

    code = "context_length_exceeded"


class CheckpointError(EngineError):
    """A checkpoint directory is missing, incomplete or not a DiffusionGemma."""

    code = "checkpoint_error"


class EngineOverloadedError(EngineError):
    """The scheduler's queue is full; the client should retry later."""

    status = 429
    code = "engine_overloaded"
    type = "rate_limit_error"

    def __init__(self, message: str, retry_after_s: float = 1.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class EngineUnavailableError(EngineError):
    """The engine failed or timed out; the caller may degrade to another mode."""

    status = 503
    code = "engine_unavailable"
