"""The decisions stream: entry format, the never-raising writer, the reader, training records."""

from __future__ import annotations

import json

from router import decisions_log
from router.decisions_log import log_decision, read_decisions, request_features, to_training_record
from router.types import RouteRequest
from tests.policies.helpers import free_port, redis_client


def test_logged_entry_round_trips(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    req = RouteRequest.from_prompt("Summarize: sales grew.", max_tokens=64)
    feats = request_features(req)
    decision = {"mode": "block", "task": "summarize", "confidence": 0.97}
    assert log_decision(client, feats, decision, {"output_tokens": 12, "finish_reason": "stop"}, stream=stream)
    (entry_id, fields), = client.xrange(stream)
    assert set(fields) == {"v", "ts", "features", "decision", "outcome"}
    assert json.loads(fields["features"])["messages"][0]["content"] == "Summarize: sales grew."
    (e,) = list(read_decisions(client, stream))
    assert e.id == entry_id and e.decision == decision and e.features["max_tokens"] == 64
    rec = to_training_record(e)
    assert (rec["task"], rec["output_tokens"], rec["max_tokens"]) == ("summarize", 12, 64)
    client.close()


def test_training_labels_prefer_reviewed_task_and_skip_unsure_pseudo_labels(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    f = request_features({"messages": [{"role": "user", "content": "hi"}]})
    log_decision(client, f, {"task": "short_qa", "confidence": 0.5}, {"output_tokens": 5, "task": "write"}, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.5}, {"output_tokens": 5}, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.95}, {"output_tokens": 5}, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.95}, {}, stream=stream)
    recs = [to_training_record(e) for e in read_decisions(client, stream)]
    assert [r and r["task"] for r in recs] == ["write", None, "short_qa", None]
    client.close()


def test_reader_pages_and_stream_is_capped(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    for i in range(450):
        log_decision(client, {"messages": [{"role": "user", "content": str(i)}]}, {}, {}, maxlen=100, stream=stream)
    n = client.xlen(stream)
    assert 100 <= n < 450  # approximate MAXLEN trims whole nodes
    got = list(read_decisions(client, stream, batch=37))
    assert len(got) == n and got[-1].features["messages"][0]["content"] == "449"
    assert len(list(read_decisions(client, stream, count=10, batch=4))) == 10
    client.close()


def test_writer_never_raises_when_redis_is_down():
    import redis

    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.2)
    before = decisions_log.stats.dropped
    assert log_decision(dead, {"messages": []}, {}, {}) is False
    assert log_decision(dead, {"messages": []}, {}, {}) is False
    assert decisions_log.stats.dropped == before + 2
    assert "ConnectionError" in decisions_log.stats.last_error
