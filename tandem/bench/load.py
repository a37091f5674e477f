"""A small load generator (the hardening tests, `tandem bench chaos`): a mixed OpenAI workload over HTTP at a fixed
concurrency, one `Outcome` per request, and a summary (status counts, latency percentiles)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import httpx

PROMPTS = [
    "Extract the name and city as JSON: Alice Smith lives in Paris.",
    "Classify the review as positive or negative: great phone, awful battery.",
    "Summarize in one line: the meeting moved to Tuesday because the room was booked.",
    "Write a Python function that adds two numbers.",
    "If Tom has 3 apples and eats one, how many are left? Think step by step.",
]


@dataclass
class Spec:
    """One request of the workload."""

    path: str  # /v1/chat/completions or /v1/completions
    body: dict  # JSON body
    headers: dict = field(default_factory=dict)  # e.g. x-tandem-mode


def mixed_workload(max_tokens=(4, 6, 8), models=("tandem", "tandem-block", "tandem-verified", "tandem-ar"), stream_every: int = 0):
    """An endless cycle of chat and text completions over every mode (forced by alias or header, or
    routed), with short answers; every `stream_every`-th request streams (0: none)."""
    for i in itertools.count():
        prompt, model, n = PROMPTS[i % len(PROMPTS)], models[i % len(models)], max_tokens[i % len(max_tokens)]
        stream = bool(stream_every) and i % stream_every == stream_every - 1
        if i % 3 == 2:
            yield Spec("/v1/completions", {"model": model, "prompt": prompt, "max_tokens": n, "stream": stream})
        elif i % 7 == 6:
            yield Spec("/v1/chat/completions", {"model": "tandem", "messages": [{"role": "user", "content": prompt}], "max_tokens": n,
                                                "stream": stream}, {"x-tandem-mode": ("block", "verified", "ar")[i % 3]})
        else:
            yield Spec("/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": n,
                                                "stream": stream})


OVERSIZED_BYTES = 3_900_000  # an oversized prompt: far past any context, under the gateway's 4 MiB body cap


def oversized_prompt(size: int = OVERSIZED_BYTES) -> str:
    """`size` characters (ASCII: as many bytes) of plain prose."""
    line = "All work and no play makes Jack a dull boy. "
    return (line * (size // len(line) + 1))[:size - 1] + "."


def oversized_workload(models=("tandem-ar", "tandem-block", "tandem-verified", "tandem"), size: int = OVERSIZED_BYTES):
    """An endless cycle of chats whose prompt can never fit the context, over every mode, one in
    four streamed: each must be a quick 400 (context_length_exceeded) that hurts no other request."""
    prompt = oversized_prompt(size)
    for i in itertools.count():
        yield Spec("/v1/chat/completions", {"model": models[i % len(models)], "messages": [{"role": "user", "content": prompt}],
                                            "max_tokens": 16, "stream": i % 4 == 3})


@dataclass
class Outcome:
    status: int  # HTTP status; 0 when the request itself failed (connection, timeout)
    latency_s: float
    mode: str | None = None  # x-tandem-mode
    degraded: bool = False  # x-tandem-degraded
    retry_after: str | None = None
    error: str | None = None  # the OpenAI error code, an in-band stream error, or the exception
    stream: bool = False
    finished: float = 0.0  # time.perf_counter() when the answer (or the failure) arrived


def openai_error(body: str) -> str | None:
    """The code (or type) of an OpenAI error body; None when `body` is not one."""
    try:
        error = json.loads(body)["error"]
        return error["code"] or error["type"]
    except Exception:
        return None


async def _one(client: httpx.AsyncClient, spec: Spec) -> Outcome:
    started = time.perf_counter()
    stream = bool(spec.body.get("stream"))
    try:
        if stream:
            async with client.stream("POST", spec.path, json=spec.body, headers=spec.headers) as r:
                every = [line async for line in r.aiter_lines()]
            lines = [line for line in every if line.startswith("data: ")]
            error = None
            if r.status_code == 200:
                errors = [json.loads(x[6:])["error"].get("code") for x in lines[:-1] if '"error"' in x]
                error = errors[0] if errors else (None if lines and lines[-1] == "data: [DONE]" else "no_done")
            else:  # refused before the stream started (a 429, a 503 with no engine up): an OpenAI error body, as unstreamed
                error = openai_error("\n".join(every)) or "http"
            return Outcome(r.status_code, time.perf_counter() - started, r.headers.get("x-tandem-mode"), False,
                           r.headers.get("retry-after"), error, True)
        r = await client.post(spec.path, json=spec.body, headers=spec.headers)
    except httpx.HTTPError as exc:
        return Outcome(0, time.perf_counter() - started, error=type(exc).__name__, stream=stream)
    error = None
    if r.status_code != 200:
        error = openai_error(r.text) or "not_an_openai_error_body"  # not OpenAI's error body: say so
    return Outcome(r.status_code, time.perf_counter() - started, r.headers.get("x-tandem-mode"),
                   r.headers.get("x-tandem-degraded") == "true", r.headers.get("retry-after"), error)


async def run_load(url: str, n: int, concurrency: int, workload=None, timeout_s: float = 60.0, on_done=None) -> list[Outcome]:
    """Send `n` requests from `workload` (default: mixed_workload()) with `concurrency` in flight.
    `on_done(count)` is called after each answer (e.g. to inject a fault mid-load)."""
    specs = iter(workload or mixed_workload())
    outcomes: list[Outcome] = []
    lock = asyncio.Lock()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:

        async def worker():
            while True:
                async with lock:
                    if len(outcomes) + worker.in_flight >= n:
                        return
                    worker.in_flight += 1
                    spec = next(specs)
                out = await _one(client, spec)
                out.finished = time.perf_counter()
                async with lock:
                    worker.in_flight -= 1
                    outcomes.append(out)
                    count = len(outcomes)
                if on_done is not None:
                    await on_done(count)

        worker.in_flight = 0
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


async def run_until(url: str, stop: asyncio.Event, concurrency: int, workload=None, timeout_s: float = 60.0) -> list[Outcome]:
    """Keep `concurrency` requests from `workload` in flight until `stop` is set; every request
    sent is waited for (its answer, its error or the client's `timeout_s`)."""
    specs = iter(workload or mixed_workload())
    outcomes: list[Outcome] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout_s, limits=limits) as client:

        async def worker():
            while not stop.is_set():
                out = await _one(client, next(specs))
                out.finished = time.perf_counter()
                outcomes.append(out)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def summary(outcomes: list[Outcome], wall_s: float) -> dict:
    ok = [o.latency_s for o in outcomes if o.status == 200 and o.error is None]
    return {
        "requests": len(outcomes),
        "wall_s": round(wall_s, 2),
        "throughput_rps": round(len(outcomes) / wall_s, 2) if wall_s else None,
        "status": dict(Counter(str(o.status) for o in outcomes)),
        "errors": dict(Counter(o.error for o in outcomes if o.error)),
        "modes": dict(Counter(o.mode for o in outcomes if o.status == 200)),
        "degraded": sum(o.degraded for o in outcomes),
        "latency_ms_p50": round(percentile(ok, 0.50) * 1000, 1),
        "latency_ms_p99": round(percentile(ok, 0.99) * 1000, 1),
        "latency_ms_max": round(max(ok) * 1000, 1) if ok else None,
    }


def to_json(outcomes: list[Outcome]) -> list[dict]:
    return [asdict(o) for o in outcomes]
