"""Render the dashboard's panels (docs/grafana/tandem.json) from live GET /metrics data, without Grafana.

Grafana cannot be installed from the registries on the machine that wrote these docs, so this draws
the same panels with matplotlib: it starts the app (two Gateway replicas, the shipped model), sends
it mixed traffic in every mode (some streamed, some errors) while scraping /metrics every
SCRAPE_S seconds, then computes each panel's PromQL from the scraped samples in Python: rate() as
the difference between scrapes a window apart, histogram_quantile() by Prometheus' linear
interpolation within a bucket. Each panel of the JSON has its computation here, by title.

    .venv/bin/python docs/grafana/render_panels.py --minutes 3 --out docs/images/dashboard-panels.png
"""

from __future__ import annotations

import argparse
import json
import math
import random
import threading
import time
from collections import defaultdict
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).with_name("tandem.json")
SCRAPE_S = 5.0
WINDOW = 4  # scrapes per rate window (20 s)
PROMPTS = ["Classify: great phone.", "Extract the name and the city: Alice Smith moved to Paris last spring.",
           "Write one sentence about the sea.", "Summarize: the meeting moved to Tuesday at noon."]


def scrape(url: str) -> dict[tuple, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def traffic(url: str, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            body = {"model": rng.choice(["tandem", "tandem", "tandem-block", "tandem-verified", "tandem-ar"]),
                    "messages": [{"role": "user", "content": rng.choice(PROMPTS)}], "max_tokens": rng.choice([8, 16, 32])}
            if rng.random() < 0.05:
                body["model"] = "no-such-model"  # a 404, for the error panels
            if rng.random() < 0.3:
                with client.stream("POST", f"{url}/v1/chat/completions", json=body | {"stream": True}) as r:
                    r.read()
            else:
                client.post(f"{url}/v1/chat/completions", json=body)


# ---- PromQL, the subset the dashboard uses, over the scrapes ------------------------------------------------
def deltas(scrapes, name: str, keep=lambda labels: True, by: tuple[str, ...] = ()) -> list[tuple[float, dict]]:
    """Per window end: increase over WINDOW scrapes / seconds, summed by `by` (rate(...) summed by)."""
    out = []
    for i in range(WINDOW, len(scrapes)):
        (t0, a), (t1, b) = scrapes[i - WINDOW], scrapes[i]
        sums: dict[tuple, float] = defaultdict(float)
        for (n, labels), v in b.items():
            d = dict(labels)
            if n == name and keep(d):
                sums[tuple(d.get(k, "") for k in by)] += (v - a.get((n, labels), 0.0)) / (t1 - t0)
        out.append((t1, dict(sums)))
    return out


def quantile(q: float, buckets: dict[float, float]) -> float:
    """histogram_quantile over cumulative bucket rates {le: rate}."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total <= 0:
        return math.nan
    rank, prev_le, prev_c = q * total, 0.0, 0.0
    for le in bounds:
        if buckets[le] >= rank:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_c) / max(buckets[le] - prev_c, 1e-12)
        prev_le, prev_c = le, buckets[le]
    return math.nan


def quantiles(scrapes, q: float, name: str, keep=lambda labels: True, by=("mode",)):
    rates = deltas(scrapes, name, keep, by=(*by, "le"))
    out = []
    for t, sums in rates:
        groups: dict[tuple, dict[float, float]] = defaultdict(dict)
        for key, v in sums.items():
            groups[key[:-1]][float(key[-1])] = v
        out.append((t, {g: quantile(q, b) for g, b in groups.items()}))
    return out


def ratio(num, den):
    return [(t, {k: (n[k] / den_v[k] if den_v.get(k) else math.nan) for k in n}) for (t, n), (_, den_v) in zip(num, den)]


def gauge(scrapes, name: str, by=("engine",), how=max):
    out = []
    for t, sample in scrapes:
        groups: dict[tuple, list] = defaultdict(list)
        for (n, labels), v in sample.items():
            if n == name:
                groups[tuple(dict(labels).get(k, "") for k in by)].append(v)
        out.append((t, {g: how(vs) for g, vs in groups.items()}))
    return out


def ok(labels):
    return labels.get("status") == "200"


def err(labels):
    return labels.get("status") != "200"


def one(series, legend):  # a series of {(): v} as {legend: v}
    return [(t, {(legend,): v.get((), math.nan)}) for t, v in series]


def panels(s) -> dict[str, list[tuple[str, list]]]:
    """Each dashboard panel's lines: title -> [(legend prefix, [(t, {group: value})])]."""
    requests_ok = deltas(s, "tandem_requests_total", ok, by=("mode",))
    total_ok = deltas(s, "tandem_requests_total", ok)
    return {
        "Requests/s by mode": [("", requests_ok)],
        "Output tokens/s by mode": [("", deltas(s, "tandem_generation_tokens_total", by=("mode",)))],
        "Tokens per forward by mode": [("", ratio(deltas(s, "tandem_tokens_per_forward_sum", by=("mode",)),
                                                  deltas(s, "tandem_tokens_per_forward_count", by=("mode",))))],
        "End-to-end latency p50 / p99 by mode": [("p50 ", quantiles(s, 0.5, "tandem_e2e_request_latency_seconds_bucket", ok)),
                                                 ("p99 ", quantiles(s, 0.99, "tandem_e2e_request_latency_seconds_bucket", ok))],
        "Time to first token p99 by mode": [("", quantiles(s, 0.99, "tandem_time_to_first_token_seconds_bucket"))],
        "Inter-token latency p50 by mode (streams)": [("", quantiles(s, 0.5, "tandem_inter_token_latency_seconds_bucket"))],
        "Routing mix: share of requests by mode": [("", [(t, {k: v / tot[()] if tot.get(()) else math.nan for k, v in m.items()})
                                                         for (t, m), (_, tot) in zip(requests_ok, total_ok)])],
        "Requests/s by route rule": [("", deltas(s, "tandem_requests_total", ok, by=("rule",)))],
        "Policy version by Gateway replica": [("", gauge(s, "tandem_policy_version", by=("replica",)))],
        "Verified: draft acceptance": [("", one(ratio(deltas(s, "tandem_spec_decode_num_accepted_tokens_total"),
                                                      deltas(s, "tandem_spec_decode_num_draft_tokens_total")), "accepted / drafted"))],
        "Draft acceptance per request p50 (verified, shadow-verified block)": [
            ("", quantiles(s, 0.5, "tandem_draft_acceptance_ratio_bucket", by=("mode", "shadow")))],
        "Errors/s by status": [("", deltas(s, "tandem_requests_total", err, by=("status",)))],
        "Error ratio and degraded ratio": [
            ("", one(ratio(deltas(s, "tandem_requests_total", err), deltas(s, "tandem_requests_total")), "errors")),
            ("", one(ratio(deltas(s, "tandem_degraded_requests_total"), total_ok), "degraded"))],
        "Redis and the decisions log": [("", one(gauge(s, "tandem_redis_up", by=(), how=min), "Redis up")),
                                        ("", one(deltas(s, "tandem_decisions_dropped_total"), "decisions dropped /s"))],
        "Requests running / waiting by engine": [("running ", gauge(s, "tandem_num_requests_running")),
                                                 ("waiting ", gauge(s, "tandem_num_requests_waiting"))],
        "Queue fill by engine (1: the next request is a 429)": [("", gauge(s, "tandem_queue_fill_ratio"))],
    }


def draw(scrapes, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]
    computed = panels(scrapes)
    assert set(titles) == set(computed), f"panels without a computation: {set(titles) ^ set(computed)}"
    t0 = scrapes[0][0]
    cols = 4
    fig, axes = plt.subplots(math.ceil(len(titles) / cols), cols, figsize=(20, 3.2 * math.ceil(len(titles) / cols)))
    for ax, title in zip(axes.flat, titles):
        lines: dict[str, list] = defaultdict(list)
        for prefix, series in computed[title]:
            for t, values in series:
                for key, v in values.items():
                    lines[prefix + " ".join(k for k in key if k) or prefix.strip() or "value"].append((t - t0, v))
        for legend, points in sorted(lines.items()):
            ax.plot([p[0] for p in points], [p[1] for p in points], label=legend)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
        ax.set_xlabel("s", fontsize=7)
    for ax in list(axes.flat)[len(titles):]:
        ax.axis("off")
    fig.suptitle("Tandem dashboard panels (docs/grafana/tandem.json), computed from live GET /metrics scrapes; drawn with matplotlib, not Grafana",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("docs/images/dashboard-panels.png"))
    args = parser.parse_args()
    from tandem.local_app import start_app

    app = start_app({"engine": {"threads": 1, "max_batch_size": 8, "max_queue": 64}}, new_cluster=True, ready_timeout_s=600,
                    gateway_replicas=2)
    stop = threading.Event()
    workers = [threading.Thread(target=traffic, args=(app.url, stop, i), daemon=True) for i in range(args.clients)]
    scrapes = []
    try:
        for w in workers:
            w.start()
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            scrapes.append((time.monotonic(), scrape(app.url)))
            time.sleep(SCRAPE_S)
        stop.set()
    finally:
        app.stop()
    draw(scrapes, args.out)
    print(f"{len(scrapes)} scrapes; wrote {args.out}")


if __name__ == "__main__":
    main()
