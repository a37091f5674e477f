"""The router's refusals, in Tandem's one error shape (`engines.errors.TandemError`): each carries
the HTTP status, OpenAI error type and code and the request parameter at fault; only the
gateway turns them into responses."""

from __future__ import annotations

from engines.errors import InvalidRequestError, NotFoundError, PermissionDeniedError, TandemError


class RouterError(TandemError):
    """A request the router refuses."""


class ModelNotFoundError(RouterError, NotFoundError):
    """The model alias is not one the policy serves."""

    code = "model_not_found"


class BadRouteError(RouterError, InvalidRequestError):
    """Malformed routing input: a bad mode header value, alias and header asking for different modes."""


class RouteForbiddenError(RouterError, PermissionDeniedError):
    """Well-formed, but the policy does not let this request force that mode."""
