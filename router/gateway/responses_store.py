"""Stored conversations for the Responses API's `previous_response_id`.

After a response, its conversation (the history it continued, its input items, its output items)
is saved under `<prefix><response id>` as JSON with a TTL (the app's `responses_ttl_s`, a day by
default; 0 keeps nothing, as `store: false` does per request); a request naming it as
`previous_response_id` gets those items back to put before its own input. Redis is the store the
gateway already has (the policy store's, or `redis_url`); without one, previous_response_id is a 400.
"""

from __future__ import annotations

import json
import logging

import redis

from engines.errors import InvalidRequestError, ServiceUnavailableError
from router.gateway.responses_api import ResponsesRequest

log = logging.getLogger("tandem.responses")

DEFAULT_TTL_S = 24 * 3600  # how long a stored response can be continued
MAX_ENTRY_BYTES = 256 * 1024  # a conversation over this is not stored
NO_STORE = "previous_response_id needs a response store: Redis (policy_source or redis_url) and responses_ttl_s above 0"


class ResponseStore:
    """Each response's conversation (input and output items) under `<prefix><response id>`, JSON,
    with a TTL; an entry over `max_bytes` is not stored (continuing it is a 400, not found)."""

    def __init__(self, client: redis.Redis, prefix: str = "tandem:response:", max_bytes: int = MAX_ENTRY_BYTES, ttl_s: int = DEFAULT_TTL_S):
        self.client, self.prefix, self.max_bytes, self.ttl_s = client, prefix, max_bytes, ttl_s

    def save(self, response_id: str, items: list, ttl_s: int | None = None) -> bool:
        """Store `items` for `ttl_s` (default: the store's); False (logged, never raised) when too large or Redis fails."""
        ttl_s = self.ttl_s if ttl_s is None else ttl_s
        data = json.dumps(items, ensure_ascii=False, separators=(",", ":")).encode()
        if len(data) > self.max_bytes:
            log.info("response %s not stored: %d bytes, over %d", response_id, len(data), self.max_bytes)
            return False
        try:
            self.client.set(self.prefix + response_id, data, ex=ttl_s)
        except redis.RedisError as exc:
            log.warning("response %s not stored: %s", response_id, type(exc).__name__)
            return False
        return True

    def load(self, response_id: str) -> list | None:
        """The stored items, or None. Redis failing is a 503: the client may retry."""
        try:
            raw = self.client.get(self.prefix + response_id)
        except redis.RedisError as exc:
            raise ServiceUnavailableError(f"the response store is unavailable: {type(exc).__name__}", code="store_unavailable") from None
        return None if raw is None else json.loads(raw)


def history_for(req: ResponsesRequest, store: ResponseStore | None) -> list | None:
    """The items previous_response_id continues (None without one). No store configured, or a
    response not stored (expired, store: false, too large), is a 400."""
    if req.previous_response_id is None:
        return None
    if store is None:
        raise InvalidRequestError(NO_STORE, param="previous_response_id", code="unsupported_parameter")
    items = store.load(req.previous_response_id)
    if items is None:
        raise InvalidRequestError(f"previous response {req.previous_response_id!r} not found (expired, not stored, or never created)",
                                  param="previous_response_id", code="previous_response_not_found")
    return items


def stores(req: ResponsesRequest, store: ResponseStore | None) -> bool:
    return store is not None and req.store is not False


def conversation_items(req: ResponsesRequest, history: list | None, response: dict) -> list[dict]:
    """What a later previous_response_id replays: the history, this input, this output."""
    return [*(history or []), *req.input_items(), *response["output"]]
