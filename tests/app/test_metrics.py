"""`GET /metrics`: the gateway's OpenTelemetry instruments in Prometheus text format, read through
the metrics aggregate (router.gateway.metrics_aggregate) and parsed by Prometheus' own parser:
every outcome counted with its latency and status, in seconds, under vLLM's base names. The
aggregate over two Gateway replicas: tests/hardening/test_metrics_across_replicas.py."""

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families


def scrape(base_url) -> dict:
    reply = httpx.get(f"{base_url}/metrics", timeout=10)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(reply.text)}


def samples(family, name=None):
    return [s for s in family.samples if name is None or s.name == name]


def total(families: dict, family: str, sample: str, **labels: str) -> float:
    return sum(s.value for s in samples(families[family], sample) if labels.items() <= s.labels.items())


def test_metrics_are_scraped_and_parsed(base_url, admin_headers):
    body = {"model": "tandem-ar", "messages": [{"role": "user", "content": "Classify: great phone."}], "max_tokens": 4}
    before = scrape(base_url)
    assert httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60).status_code == 200
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body | {"stream": True}, timeout=60) as r:
        assert r.status_code == 200 and "[DONE]" in "".join(r.iter_text())
    assert httpx.post(f"{base_url}/v1/chat/completions", json=body | {"model": "no-such-model"}, timeout=60).status_code == 404
    assert httpx.post(f"{base_url}/v1/chat/completions", json=body | {"max_tokens": -1}, timeout=60).status_code == 400
    time.sleep(1.2)  # the engines' load is polled every half second
    families = scrape(base_url)
    names = set(families)

    def grew(family: str, sample: str, **labels: str) -> float:
        return total(families, family, sample, **labels) - (total(before, family, sample, **labels) if family in before else 0.0)

    requests = samples(families["tandem_requests"], "tandem_requests_total")
    assert grew("tandem_requests", "tandem_requests_total", status="200", mode="ar", rule="forced_model") == 2
    assert any(s.labels.get("status") == "404" for s in requests)
    # latency for every outcome, in seconds, with its status: the two answers, the 404 and the 400 refused by the schema
    latency = families["tandem_e2e_request_latency_seconds"]
    assert latency.type == "histogram" and any(s.name.endswith("_bucket") and s.labels.get("mode") == "ar" for s in latency.samples)
    assert grew("tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", mode="ar", status="200") == 2
    assert grew("tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", status="404") == 1
    assert grew("tandem_e2e_request_latency_seconds", "tandem_e2e_request_latency_seconds_count", status="400") == 1
    assert grew("tandem_time_to_first_token_seconds", "tandem_time_to_first_token_seconds_count", mode="ar") == 2  # one streamed, one not
    assert grew("tandem_generation_tokens", "tandem_generation_tokens_total", mode="ar") >= 2
    assert grew("tandem_prompt_tokens", "tandem_prompt_tokens_total", mode="ar") >= 2
    for gauge in ("tandem_num_requests_running", "tandem_num_requests_waiting", "tandem_queue_fill_ratio"):
        assert {s.labels["engine"] for s in samples(families[gauge])} == {"block", "ar"}
    version = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]["version"]
    (policy,) = samples(families["tandem_policy_version"])
    assert policy.value == version and policy.labels["replica"]  # one series per Gateway replica
    assert samples(families["tandem_redis_up"])[0].value == 1.0
    assert "tandem_tokens_per_forward" in names
    series = {s.name for f in families.values() for s in f.samples}
    assert not [n for n in series if "milli" in n], "a series in milliseconds"
    assert not [s for f in families.values() for s in f.samples if any(k.startswith("otel_") for k in s.labels)]
