"""`tandem bench router`: how long `Router.decide()` takes per request, with its parts.

Runs the held-out requests through `decide()` one at a time (as the gateway calls it) and
reports wall-clock and CPU-time percentiles per call: the full decision from a validated
`RouteRequest`, the same from a plain dict (pydantic validation included), the feature
extraction, the lean model, and - for comparison - scikit-learn's own pipeline on one request.
CPU time (the thread's clock) is what the call costs; wall time adds whatever the OS scheduler
takes away on a busy machine, so the load average is recorded with the numbers.
Targets: decide() p50 <= 1 ms and p99 <= 5 ms.
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

TARGET_P50_MS, TARGET_P99_MS = 1.0, 5.0


def _machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "gpu": None, "python": platform.python_version(), "load_avg": list(os.getloadavg())}


def _timed(fn, items, repeat: int = 1) -> tuple[np.ndarray, np.ndarray]:
    wall, cpu = [], []
    for _ in range(repeat):
        for it in items:
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            fn(it)
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            wall.append(t1 - t0)
            cpu.append(c1 - c0)
    return np.array(wall) / 1e6, np.array(cpu) / 1e6


def _row(name: str, wall: np.ndarray, cpu: np.ndarray) -> dict:
    q = lambda a, p: round(float(np.percentile(a, p)), 4)  # noqa: E731
    return {"what": name, "calls": int(len(wall)), "p50_ms": q(wall, 50), "p90_ms": q(wall, 90), "p99_ms": q(wall, 99),
            "max_ms": round(float(wall.max()), 4), "mean_ms": round(float(wall.mean()), 4), "cpu_p50_ms": q(cpu, 50), "cpu_p99_ms": q(cpu, 99)}


def run(n: int = 800, repeat: int = 3, model_path=None, reference_calls: int = 200) -> dict:
    from policies.stores import default_policy
    from lab.routing.dataset import TEST_PATH, load_jsonl
    from router.decision.decide import Router
    from router.decision.features import extract_features
    from lab.routing.fit import predict_reference
    from router.decision.types import RouteRequest

    recs = load_jsonl(TEST_PATH)[:n]
    router = Router(store=default_policy(), model_path=model_path)
    bodies = [{k: r[k] for k in ("messages", "max_tokens", "response_format", "tools", "stop") if r.get(k) is not None} for r in recs]
    reqs = [RouteRequest.model_validate({**b, "request_id": r["id"]}) for b, r in zip(bodies, recs)]
    feats = [extract_features(q.messages, q.max_tokens, q.response_format, q.tools, q.stop) for q in reqs]
    for q in reqs[:100]:  # warm-up: caches, allocator
        router.decide(q)
    load_before = os.getloadavg()
    rows = [
        _row("decide(RouteRequest)", *_timed(router.decide, reqs, repeat)),
        _row("decide(dict)", *_timed(router.decide, bodies, 1)),
        _row("features", *_timed(lambda q: extract_features(q.messages, q.max_tokens, q.response_format, q.tools, q.stop), reqs, 1)),
        _row("model.predict (lean)", *_timed(router.model.predict, feats, 1)),
        _row("sklearn pipeline, 1 request", *_timed(lambda f: predict_reference(router.model, [f]), feats[:reference_calls], 1)),
    ]
    machine = _machine()
    machine["load_avg_during"] = [round(x, 2) for x in load_before]
    d = rows[0]
    return {
        "machine": machine,
        "n_requests": len(reqs),
        "repeat": repeat,
        "rows": rows,
        "targets": {"p50_ms": TARGET_P50_MS, "p99_ms": TARGET_P99_MS,
                    "p50_ok": d["p50_ms"] <= TARGET_P50_MS, "p99_ok": d["p99_ms"] <= TARGET_P99_MS},
    }


def format_table(res: dict) -> str:
    m = res["machine"]
    head = f"{'what':<30} {'calls':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'mean ms':>8} {'cpu p50':>8} {'cpu p99':>8}"
    lines = [f"machine: {m['cpu']}, {m['cores']} cores, no GPU, load avg {m['load_avg_during'][0]:.2f}", head, "-" * len(head)]
    for r in res["rows"]:
        lines.append(f"{r['what']:<30} {r['calls']:>6} {r['p50_ms']:>8.3f} {r['p90_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['max_ms']:>8.3f} "
                     f"{r['mean_ms']:>8.3f} {r['cpu_p50_ms']:>8.3f} {r['cpu_p99_ms']:>8.3f}")
    t = res["targets"]
    lines.append(f"targets: p50 <= {t['p50_ms']} ms {'OK' if t['p50_ok'] else 'MISSED'}; p99 <= {t['p99_ms']} ms {'OK' if t['p99_ok'] else 'MISSED'}")
    return "\n".join(lines)


def main(args) -> int:
    res = run(n=args.n, repeat=args.repeat, model_path=args.model)
    print(format_table(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
        print(f"wrote {args.json}")
    return 0
