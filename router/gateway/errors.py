"""Errors only the gateway raises: about the HTTP exchange itself (credentials, methods, sizes,
timeouts of the client's own sending) or an answer it could not make valid. Engines never raise
them; the statuses every layer shares (TandemError and its 400/403/404/409/429/503 kinds) stay in
engines/errors.py, the bottom floor.

They differ only in what the client is told, so they are one table: each row a TandemError
subclass with its HTTP status, code and when it is raised (OpenAI's `invalid_request_error` type
unless named)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from engines.errors import TandemError
from policies.stores import redact


def _http_error(name: str, status: int, code: str, when: str, kind: str = "invalid_request_error") -> type[TandemError]:
    """A TandemError subclass `name` of this module (it pickles by name, as every TandemError does);
    `kind` is OpenAI's error type."""
    fields = {"status": status, "type": kind, "code": code, "__doc__": when, "__module__": __name__}
    return type(name, (TandemError,), fields)


AuthenticationError = _http_error("AuthenticationError", 401, "invalid_api_key", "No or a wrong admin token.",
                                  kind="authentication_error")
MethodNotAllowedError = _http_error("MethodNotAllowedError", 405, "method_not_allowed", "A method the route lacks.")
RequestTimeoutError = _http_error("RequestTimeoutError", 408, "request_timeout", "The client sent too slowly.")
PayloadTooLargeError = _http_error("PayloadTooLargeError", 413, "request_too_large", "The body is over the limit.")
HeadersTooLargeError = _http_error("HeadersTooLargeError", 431, "request_headers_too_large", "Headers over the limit.")
UnprocessableError = _http_error("UnprocessableError", 422, "unprocessable", "No valid answer to a valid request.")


def error_response(exc: TandemError) -> JSONResponse:
    body = exc.body()
    body["error"]["message"] = redact(body["error"]["message"])  # a store error may name a URL with credentials
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)
