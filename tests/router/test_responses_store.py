"""The Responses API's conversation store (router/gateway/responses_store.py) on a real Redis: saved
with a TTL, replayed for previous_response_id, bounded in size; without a store or an entry a 400,
Redis down a 503 on load and a quiet miss on save."""

from __future__ import annotations

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engines.errors import InvalidRequestError, ServiceUnavailableError
from router.gateway.responses_answers import new_response_id, to_response
from router.gateway.responses_chat import chat_request
from router.gateway.responses_store import NO_STORE, ResponseStore, conversation_items, history_for, stores
from tests.policies.helpers import free_port, redis_client
from tests.router.responses_factories import CALL, answer_of, req_of


def test_store_round_trip_with_ttl_and_the_chain_replays(store, prefix):
    first = req_of()
    resp = to_response(answer_of(CALL, tools=True), first, new_response_id())
    assert stores(first, store) and store.save(resp["id"], conversation_items(first, None, resp), ttl_s=600)
    assert 0 < redis_client().ttl(f"{prefix}response:{resp['id']}") <= 600
    call_id = resp["output"][0]["call_id"]
    second = req_of(previous_response_id=resp["id"], instructions="Use Celsius.",
                    input=[{"type": "function_call_output", "call_id": call_id, "output": "22C"}])
    chat = chat_request(second, history_for(second, store))
    assert [(m.role, m.content) for m in chat.messages] == [("system", "Use Celsius."), ("user", "Weather in Paris?"),
                                                            ("assistant", None), ("tool", "22C")]
    assert chat.messages[2].tool_calls[0].id == call_id
    chat.engine_messages()  # the tool result answers the replayed call


def test_store_refuses_oversized_entries_and_misses_are_none(prefix):
    client = redis_client()
    small = ResponseStore(client, prefix=prefix, max_bytes=1024)
    assert small.save("resp_big", [{"role": "user", "content": "x" * 2000}]) is False
    assert small.load("resp_big") is None and small.load("resp_never") is None
    assert small.save("resp_ok", [{"role": "user", "content": "é"}]) and small.load("resp_ok") == [{"role": "user", "content": "é"}]
    assert client.ttl(f"{prefix}resp_ok") > 23 * 3600  # the default TTL: a day
    client.close()


def test_previous_response_id_without_a_store_or_a_stored_response_is_a_400(store):
    req = req_of(previous_response_id="resp_missing")
    with pytest.raises(InvalidRequestError) as exc:
        history_for(req, None)
    assert exc.value.status == 400 and exc.value.message == NO_STORE and exc.value.param == "previous_response_id"
    with pytest.raises(InvalidRequestError, match="not found") as exc:
        history_for(req, store)
    assert exc.value.code == "previous_response_not_found"
    assert history_for(req_of(), None) is None and not stores(req_of(store=False), store) and not stores(req_of(), None)


def test_redis_down_fails_loads_loudly_and_saves_quietly():
    down = ResponseStore(redis.Redis(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2, retry=Retry(NoBackoff(), 0)))
    assert down.save("resp_1", []) is False
    with pytest.raises(ServiceUnavailableError):
        down.load("resp_1")
