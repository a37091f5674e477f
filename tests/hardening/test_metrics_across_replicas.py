"""GET /metrics through the proxy of an app with two Gateway replicas (the hardening app, as
serve_config.yaml runs): every scrape answers the same counters whichever replica takes it, no
counter ever goes down while traffic spread over both replicas is counted, and the totals count
every request (each replica's own registry would count about half of them)."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.hardening.conftest import stats_by_replica

REQUESTS, CONCURRENCY = 24, 6
IDLE_SCRAPES = 20


def counters(text: str) -> dict[tuple, float]:
    """Every counter and histogram sample of a scrape (the series that must never go down), by name and labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
            if f.type in ("counter", "histogram") for s in f.samples}


def answered(sample: dict[tuple, float]) -> float:
    return sum(v for (name, labels), v in sample.items() if name == "tandem_requests_total" and ("status", "200") in labels)


async def scrapes(url: str, n: int) -> list[str]:
    """`n` scrapes, fired together so that the proxy spreads them over the replicas (it keeps one
    caller's sequential calls on one replica), each on a connection of its own."""
    async def one() -> str:
        async with httpx.AsyncClient(timeout=30) as client:
            r = await client.get(f"{url}/metrics")
            assert r.status_code == 200, r.text
            return r.text

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def traffic_while_scraping(url: str) -> list[dict[tuple, float]]:
    """REQUESTS short AR requests at CONCURRENCY, scraped until they are done one scrape after another,
    as Prometheus scrapes a target (scrapes that overlap may be answered in either order)."""
    body = {"model": "tandem-ar", "messages": [{"role": "user", "content": "Classify: great phone."}], "max_tokens": 2}
    seen: list[dict[tuple, float]] = []
    done = asyncio.Event()

    async def requests() -> None:
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(client) -> None:
            async with limit:
                r = await client.post(f"{url}/v1/chat/completions", json=body)
                assert r.status_code == 200, r.text

        async with httpx.AsyncClient(timeout=60) as client:
            await asyncio.gather(*(one(client) for _ in range(REQUESTS)))
        done.set()

    async def scraper() -> None:
        while not done.is_set():
            seen.append(counters((await scrapes(url, 1))[0]))

    await asyncio.gather(requests(), scraper())
    return seen


def test_scrapes_agree_whichever_replica_answers_and_never_go_down(app_url):
    before_stats = {pid: s["modes"].get("ar", {}).get("requests", 0) for pid, s in stats_by_replica(app_url).items()}
    before = answered(counters(asyncio.run(scrapes(app_url, 1))[0]))

    during = asyncio.run(traffic_while_scraping(app_url))
    for earlier, later in zip(during, during[1:]):
        dropped = {key: (earlier[key], later.get(key)) for key in earlier if later.get(key, -1.0) < earlier[key]}
        assert not dropped, f"a counter went down between two scrapes: {dropped}"
    assert len(during) >= 4

    # the premise: both replicas answered some of the requests (else this tests one registry)
    after_stats = {pid: s["modes"].get("ar", {}).get("requests", 0) for pid, s in stats_by_replica(app_url).items()}
    served = {pid: after_stats[pid] - before_stats.get(pid, 0) for pid in after_stats}
    assert len([n for n in served.values() if n > 0]) == 2, f"the requests did not spread over both Gateway replicas: {served}"

    deadline = time.monotonic() + 15  # each replica publishes its samples every second
    while answered(latest := counters(asyncio.run(scrapes(app_url, 1))[0])) < before + REQUESTS and time.monotonic() < deadline:
        time.sleep(0.5)
    assert answered(latest) == before + REQUESTS, f"the totals count {answered(latest) - before:g} of {REQUESTS} requests"

    idle = [counters(t) for t in asyncio.run(scrapes(app_url, IDLE_SCRAPES // 2)) + asyncio.run(scrapes(app_url, IDLE_SCRAPES // 2))]
    differing = {key for sample in idle for key in set(sample) | set(idle[0]) if sample.get(key) != idle[0].get(key)}
    assert not differing, f"{IDLE_SCRAPES} scrapes with no traffic disagree on {sorted(differing)[:5]}"
    assert answered(idle[0]) == before + REQUESTS
