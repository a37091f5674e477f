"""`GET /metrics`: the gateway's OpenTelemetry instruments in Prometheus text format, parsed by
Prometheus' own parser."""

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families


def scrape(base_url) -> dict:
    reply = httpx.get(f"{base_url}/metrics", timeout=10)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(reply.text)}


def samples(family, name=None):
    return [s for s in family.samples if name is None or s.name == name]


def test_metrics_are_scraped_and_parsed(base_url, admin_headers):
    body = {"model": "tandem-ar", "messages": [{"role": "user", "content": "Classify: great phone."}], "max_tokens": 4}
    assert httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60).status_code == 200
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body | {"stream": True}, timeout=60) as r:
        assert r.status_code == 200 and "[DONE]" in "".join(r.iter_text())
    assert httpx.post(f"{base_url}/v1/chat/completions", json=body | {"model": "no-such-model"}, timeout=60).status_code == 404
    time.sleep(1.2)  # the engines' load is polled every half second
    families = scrape(base_url)
    names = set(families)
    requests = samples(families["tandem_requests"], "tandem_requests_total")
    forced = [s for s in requests if s.labels.get("status") == "200" and s.labels.get("mode") == "ar" and s.labels.get("rule") == "forced_model"]
    assert forced and sum(s.value for s in forced) >= 2  # other tests share this app: at least ours
    assert any(s.labels.get("status") == "404" for s in requests)
    latency = families["tandem_latency_milliseconds"]
    assert latency.type == "histogram" and any(s.name.endswith("_bucket") and s.labels.get("mode") == "ar" for s in latency.samples)
    ttft = families["tandem_time_to_first_token_milliseconds"]
    count = [s for s in ttft.samples if s.name.endswith("_count") and s.labels.get("mode") == "ar"]
    assert count and count[0].value >= 2  # one streamed, one not
    assert {s.labels["engine"] for s in samples(families["tandem_queue_depth"])} == {"block", "ar"}
    assert {s.labels["engine"] for s in samples(families["tandem_running_rows"])} == {"block", "ar"}
    version = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]["version"]
    assert samples(families["tandem_policy_version"])[0].value == version
    assert samples(families["tandem_redis_up"])[0].value == 1.0
    assert "tandem_tokens_per_forward" in names
