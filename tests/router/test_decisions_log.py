"""The decisions stream against a real Redis: no prompt text by default, opt-in text cut to the
per-entry cap, trimming by age, count and bytes, the reader, training records, the never-raising
writer, and the settings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from router.gateway import decisions_log
from router.gateway.decision_entry import request_features
from router.gateway.decisions_log import DecisionsLogSettings, entry_weight, log_decision
from lab.routing.decisions import read_decisions, to_training_record
from router.decision.features import NUMERIC_FEATURES
from router.decision.types import RouteRequest
from tests.helpers import wait_until
from tests.policies.helpers import free_port, redis_client

ROOT = Path(__file__).resolve().parents[2]

SSN, EMAIL, CARD = "123-45-6789", "jane.doe@example.com", "4111 1111 1111 1111"
SECRETS = (SSN, EMAIL, CARD, "4111111111111111")
DECISION = {"mode": "block", "task": "extract", "confidence": 0.97, "reason": "task default", "rule": "task_default",
            "predicted_tokens": 24, "policy_version": 3, "canvas": 32, "steps": 8, "request_id": "chatcmpl-abc"}
OUTCOME = {"mode": "block", "output_tokens": 12, "finish_reason": "stop", "latency_ms": 41.5, "drafted": 0, "accepted": 0}
TEXT_ON = DecisionsLogSettings(store_text=True)


def sensitive_request(tools_bytes: int = 0, **kw) -> dict:
    """A request with an SSN, an email and a card number in every text-bearing field."""
    pii = f"SSN {SSN}, email {EMAIL}, card {CARD}"
    return request_features(RouteRequest(
        messages=[{"role": "system", "content": f"You extract fields. Escalate to {EMAIL}."},
                  {"role": "user", "content": [{"type": "text", "text": f"Extract as JSON: {pii}"}]}],
        tools=[{"type": "function", "function": {"name": "lookup_customer", "description": pii + " " + "x" * tools_bytes,
                                                 "parameters": {"type": "object", "properties": {"ssn": {"const": SSN}}}}}],
        response_format={"type": "json_schema", "json_schema": {"name": "card", "schema": {"type": "object", "description": CARD}}},
        stop=[EMAIL], max_tokens=64, **kw,
    ))


def raw_entries(client, stream: str) -> list[dict[str, str]]:
    return [fields for _, fields in client.xrange(stream)]


def stored_bytes(fields: dict[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in fields.items() if k != "cum")


# ---- what an entry holds -----------------------------------------------------------------------------

def test_a_default_entry_holds_no_prompt_text(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    assert log_decision(client, sensitive_request(), DECISION, OUTCOME, stream=stream)
    (fields,) = raw_entries(client, stream)
    raw = json.dumps(fields)
    for secret in SECRETS + ("lookup_customer", "Extract as JSON", "You extract fields"):
        assert secret not in raw, f"{secret!r} reached the stream: {raw}"
    assert set(fields) == {"v", "ts", "features", "decision", "outcome", "cum"}
    features = json.loads(fields["features"])
    assert list(features["numeric"]) == list(NUMERIC_FEATURES)
    assert features["numeric"]["has_tools"] == 1.0 and features["numeric"]["json_schema"] == 1.0
    assert (features["messages"], features["tools"], features["stop"], features["response_format"]) == (2, 1, 1, "json_schema")
    assert features["prompt_chars"] > 0 and features["tools_bytes"] > 0 and features["max_tokens"] == 64
    (e,) = list(read_decisions(client, stream))
    assert not e.has_text and to_training_record(e) is None and e.decision == DECISION
    client.close()


def test_opt_in_text_round_trips_into_a_training_record(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    req = RouteRequest.from_prompt("Summarize: sales grew.", max_tokens=64)
    assert log_decision(client, request_features(req), {"mode": "block", "task": "summarize", "confidence": 0.97},
                        {"output_tokens": 12, "finish_reason": "stop"}, TEXT_ON, stream=stream)
    (entry_id, fields), = client.xrange(stream)
    assert json.loads(fields["text"])["messages"] == [{"role": "user", "content": "Summarize: sales grew."}]
    assert "cut" not in json.loads(fields["text"])
    (e,) = list(read_decisions(client, stream))
    assert e.id == entry_id and e.has_text and e.features["max_tokens"] == 64
    rec = to_training_record(e)
    assert (rec["task"], rec["output_tokens"], rec["max_tokens"]) == ("summarize", 12, 64)
    client.close()


def test_opt_in_text_is_cut_to_the_entry_cap_and_says_what_was_cut(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    settings = DecisionsLogSettings(store_text=True, max_entry_bytes=8192)
    long_user = "HEAD-MARK " + "lorem ipsum dolor sit amet " * 4000 + " TAIL-MARK"  # about 108 KB
    req = sensitive_request(tools_bytes=3_000_000) | {"messages": [{"role": "user", "content": long_user}]}
    before = decisions_log.stats.text_cut
    assert log_decision(client, req, {"task": "write", "confidence": 0.99}, {"output_tokens": 40}, settings, stream=stream)
    assert decisions_log.stats.text_cut == before + 1
    (fields,) = raw_entries(client, stream)
    assert stored_bytes(fields) + len("cum") + len(fields["cum"]) <= 8192
    text = json.loads(fields["text"])
    assert text["cut"]["tools"] == {"bytes": json.loads(fields["features"])["tools_bytes"], "kept": "names"}
    assert text["tools"] == [{"type": "function", "function": {"name": "lookup_customer"}}]  # the router reads only their count
    assert text["cut"]["response_format"]["kept"] == "type" and text["response_format"] == {"type": "json_schema"}
    content = text["messages"][0]["content"]
    assert content.startswith("HEAD-MARK") and content.endswith("TAIL-MARK") and " ... " in content
    assert len(content) == text["cut"]["messages"]["limit_chars"] + len(" ... ") and text["cut"]["messages"]["chars_cut"] == len(long_user) - len(content)
    (e,) = list(read_decisions(client, stream))
    rec = to_training_record(e)
    assert rec["task"] == "write" and len(rec["tools"]) == 1 and rec["messages"][0]["content"] == content
    client.close()


def test_oversized_tools_do_not_grow_redis_beyond_the_cap(prefix):
    """The incident: 10 requests with a 3 MB `tools` field added 30 MB to the policy's Redis."""
    client = redis_client()
    for name, settings in (("off", DecisionsLogSettings()), ("on", DecisionsLogSettings(store_text=True, max_entry_bytes=16384))):
        stream = f"{prefix}{name}:decisions"
        for _ in range(10):
            assert log_decision(client, sensitive_request(tools_bytes=3_000_000), DECISION, OUTCOME, settings, stream=stream)
        assert all(stored_bytes(f) <= settings.max_entry_bytes for f in raw_entries(client, stream))
        usage = client.memory_usage(stream, samples=0)
        assert usage <= 10 * entry_weight(settings.max_entry_bytes) < 300_000, (name, usage)  # not 30 MB
    client.close()


# ---- trimming ---------------------------------------------------------------------------------------

def test_entries_older_than_the_ttl_are_trimmed_and_the_stream_expires(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    now_ms = int(time.time() * 1000)
    day = 86_400_000
    old = {"v": "1", "ts": "0", "features": json.dumps({"messages": [{"role": "user", "content": f"my SSN is {SSN}"}]})}
    client.xadd(stream, old, id=f"{now_ms - 9 * day}-0")  # format-1 entries, with text, from before the upgrade
    client.xadd(stream, old, id=f"{now_ms - 8 * day}-0")
    client.xadd(stream, old, id=f"{now_ms - 6 * day}-0")  # within 7 days: kept
    assert log_decision(client, sensitive_request(), DECISION, OUTCOME, stream=stream)
    ages = [(now_ms - int(entry_id.split("-")[0])) / day for entry_id, _ in client.xrange(stream)]
    assert len(ages) == 2 and 5.9 < ages[0] < 6.1 and ages[1] < 0.01
    assert 0 < client.pttl(stream) <= 7 * day and 0 < client.pttl(stream + ":acct") <= 7 * day

    short = DecisionsLogSettings(ttl_s=1)
    stream2 = prefix + "short:decisions"
    for _ in range(3):
        assert log_decision(client, sensitive_request(), DECISION, OUTCOME, short, stream=stream2)
    last_ms = int(client.xrevrange(stream2, count=1)[0][0].split("-")[0])  # an entry's id is Redis's clock at its write
    server_ms = lambda: (lambda s, us: s * 1000 + us // 1000)(*client.time())  # noqa: E731
    wait_until(lambda: server_ms() > last_ms + 1000, what="Redis's clock a ttl_s past the last write")
    assert log_decision(client, sensitive_request(), DECISION, OUTCOME, short, stream=stream2)
    assert client.xlen(stream2) == 1  # the three written over a second ago are gone
    # no writes for ttl_s: the stream and its byte account expire (Redis's own expiry)
    wait_until(lambda: not client.exists(stream2) and not client.exists(stream2 + ":acct"), what="the idle stream expired")
    client.close()


def test_the_byte_cap_holds_oldest_first(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    settings = DecisionsLogSettings(store_text=True, max_entry_bytes=8192, max_bytes=100_000)
    sizes = [(i * 7919) % 9000 + 10 for i in range(300)]  # 10 to 9,000 characters, mixed
    for i, n in enumerate(sizes):
        req = request_features({"messages": [{"role": "user", "content": f"#{i} " + "y" * n}]})
        assert log_decision(client, req, {"task": "write"}, {"output_tokens": n}, settings, stream=stream)
        if i % 25 == 0 or i == len(sizes) - 1:
            rows = client.xrange(stream)
            assert sum(entry_weight(stored_bytes(f)) for _, f in rows) <= settings.max_bytes
            assert client.memory_usage(stream, samples=0) <= settings.max_bytes  # the weight is an upper bound of Redis's memory
    got = [e.outcome["output_tokens"] for e in read_decisions(client, stream)]
    assert got == sizes[-len(got):]  # the newest, in order: the oldest went first
    assert len(got) > settings.max_bytes // entry_weight(settings.max_entry_bytes)  # smaller entries fit more than a worst-case MAXLEN
    client.close()


def test_the_entry_cap_is_exact_and_the_reader_pages(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    settings = DecisionsLogSettings(max_entries=100)
    for i in range(150):
        assert log_decision(client, {"messages": [{"role": "user", "content": str(i)}]}, {}, {"output_tokens": i + 1}, settings, stream=stream)
    assert client.xlen(stream) == 100
    got = list(read_decisions(client, stream, batch=37))
    assert [e.outcome["output_tokens"] for e in got] == list(range(51, 151))
    assert len(list(read_decisions(client, stream, count=10, batch=4))) == 10
    client.close()


# ---- retraining ---------------------------------------------------------------------------------------

def test_training_labels_prefer_reviewed_task_keep_unsure_lengths_and_read_shadow_agreement(prefix):
    client = redis_client()
    stream = prefix + "decisions"
    f = request_features({"messages": [{"role": "user", "content": "hi"}]})
    log_decision(client, f, {"task": "short_qa", "confidence": 0.5}, {"output_tokens": 5, "task": "write"}, TEXT_ON, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.5}, {"output_tokens": 5}, TEXT_ON, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.95}, {"output_tokens": 5}, TEXT_ON, stream=stream)
    log_decision(client, f, {"task": "short_qa", "confidence": 0.95}, {}, TEXT_ON, stream=stream)
    for mode, share in (("block", 1.0), ("block", 0.4), ("ar", 1.0)):  # only a block answer's shadow check says if block agrees
        log_decision(client, f, {"task": "short_qa", "confidence": 0.3}, {"mode": mode, "shadow_agreement": share}, TEXT_ON, stream=stream)
    recs = [to_training_record(e) for e in read_decisions(client, stream)]
    labels = [r and (r.get("task"), r.get("output_tokens"), r.get("block_agrees")) for r in recs]
    assert labels == [("write", 5, None), (None, 5, None), ("short_qa", 5, None), ("short_qa", None, None), (None, None, True), (None, None, False), None]
    client.close()


def test_retraining_reads_text_entries_old_and_new_and_counts_those_without(prefix, redis_url):
    from lab.routing.train import redis_records

    client = redis_client()
    stream = prefix + "decisions"
    reviewed = {"output_tokens": 9, "task": "classify"}
    v1 = {"v": "1", "ts": "1", "features": json.dumps({"messages": [{"role": "user", "content": "Label: great phone."}], "max_tokens": 8}),
          "decision": "{}", "outcome": json.dumps(reviewed)}
    client.xadd(stream, v1)  # format 1 (whole request in `features`) still trains
    for _ in range(3):
        log_decision(client, request_features({"messages": [{"role": "user", "content": "Label: bad phone."}]}), {}, reviewed, stream=stream)
    log_decision(client, request_features({"messages": [{"role": "user", "content": "Label: ok phone."}]}), {}, reviewed, TEXT_ON, stream=stream)
    log_decision(client, request_features({"messages": [{"role": "user", "content": "Label: meh."}]}), {}, {}, TEXT_ON, stream=stream)
    recs, seen = redis_records(redis_url, stream)
    assert [r["messages"][0]["content"] for r in recs] == ["Label: great phone.", "Label: ok phone."]
    assert recs[0]["max_tokens"] == 8
    assert seen == {"entries": 6, "no_text": 3, "unlabeled": 1, "task": 2, "length": 2, "agreement": 0}
    client.close()


def test_train_says_how_many_entries_carry_no_text(prefix, redis_url, tmp_path, capsys):
    from tandem.main import main

    client = redis_client()
    stream = prefix + "decisions"
    for task in ("classify", "write"):
        log_decision(client, request_features({"messages": [{"role": "user", "content": f"a {task} request"}]}), {},
                     {"output_tokens": 9, "task": task}, stream=stream)
    client.close()
    rc = main(["router", "train", "--from-redis", redis_url, "--stream", stream, "--no-base", "--out", str(tmp_path / "m.skops")])
    err = capsys.readouterr().err
    assert rc == 2 and "2 of 2 logged decisions carry no prompt text" in err and "decisions_log.store_text: true" in err


# ---- the writer and the settings -------------------------------------------------------------------

def test_writer_never_raises_when_redis_is_down():
    import redis

    dead = redis.Redis(port=free_port(), socket_connect_timeout=0.2)
    before = decisions_log.stats.dropped
    assert log_decision(dead, {"messages": []}, {}, {}) is False
    assert log_decision(dead, {"messages": []}, {}, {}) is False
    assert decisions_log.stats.dropped == before + 2
    assert "ConnectionError" in decisions_log.stats.last_error


@pytest.mark.parametrize("store_text", [False, True])
def test_the_gateway_logs_by_its_settings(prefix, redis_url, store_text):
    from router.decision.types import Decision
    from router.gateway.orchestration import Gateway
    from router.gateway.outcome import Outcome

    gw = Gateway(None, None, policy_source=str(ROOT / "policies" / "default.yaml"), redis_url=redis_url, key_prefix=prefix,
                 decisions_log={"store_text": store_text, "max_entry_bytes": 4096})
    route = RouteRequest.from_prompt(f"Extract the card: {CARD}", max_tokens=8, request_id="r" * 10_000)
    decision = Decision(mode="ar", canvas=None, steps=None, reason="test", rule="task_default", task="extract", predicted_tokens=8,
                        confidence=0.99, policy_version=1, request_id=route.request_id)
    outcome = Outcome(mode="ar", degraded=False, stream=False, latency_ms=12.5, estimate_ms=None, output_tokens=8, finish_reason="stop",
                      tokens_per_forward=1.0, drafted=0, accepted=0, acceptance=None, ar_tokens=8, looked_up=0)
    gw.records.log_decision(route, decision, outcome)
    (fields,) = raw_entries(redis_client(), prefix + "decisions")
    assert (CARD in fields.get("text", "")) is store_text and CARD not in fields["features"] + fields["decision"]
    assert len(json.loads(fields["decision"])["request_id"]) == decisions_log.MAX_ID_CHARS  # a client's x-request-id is cut too
    assert json.loads(fields["outcome"]) == outcome.record()
    gw.redis.close()


def test_settings_are_checked_and_named_in_the_app_args():
    from router.app import AppArgs

    assert AppArgs().decisions_log == DecisionsLogSettings() and not AppArgs().decisions_log.store_text
    args = AppArgs.model_validate({"decisions_log": {"store_text": True, "ttl_s": 3600}})
    assert args.decisions_log.store_text and args.decisions_log.ttl_s == 3600
    with pytest.raises(ValidationError, match="max_bytes must be at least 20736"):
        DecisionsLogSettings(max_entry_bytes=16384, max_bytes=10_000)
    with pytest.raises(ValidationError, match="greater than or equal to 4096"):
        DecisionsLogSettings(max_entry_bytes=100)
    with pytest.raises(ValidationError, match="store_txt"):
        AppArgs.model_validate({"decisions_log": {"store_txt": True}})
    for name, f in DecisionsLogSettings.model_fields.items():
        assert f.description, name
