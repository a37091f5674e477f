"""Errors only the gateway raises: about the HTTP exchange itself (credentials, methods, sizes,
timeouts of the client's own sending) or an answer it could not make valid. Engines never raise
them; the statuses every layer shares (TandemError and its 400/403/404/409/429/503 kinds) stay in
engines/errors.py, the bottom floor."""

from __future__ import annotations

from engines.errors import TandemError


class AuthenticationError(TandemError):
    status, type, code = 401, "authentication_error", "invalid_api_key"


class MethodNotAllowedError(TandemError):
    status, type, code = 405, "invalid_request_error", "method_not_allowed"


class RequestTimeoutError(TandemError):
    """The client did not send its request in time."""

    status, type, code = 408, "invalid_request_error", "request_timeout"


class PayloadTooLargeError(TandemError):
    status, type, code = 413, "invalid_request_error", "request_too_large"


class HeadersTooLargeError(TandemError):
    status, type, code = 431, "invalid_request_error", "request_headers_too_large"


class UnprocessableError(TandemError):
    """Valid, but the model's answer could not satisfy it."""

    status, type, code = 422, "invalid_request_error", "unprocessable"
