"""One Tandem app for the hardening tests, in its own process and Ray cluster (serve_app.py),
with settings that make failures reachable: a small engine queue (429s), a short engine timeout
(a dead replica turns into a retry within seconds), and its policy store and decisions stream on
a private, password-protected redis-server that the tests stop and restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.policies.helpers import free_port, redis_server_binary

REPO = Path(__file__).resolve().parents[2]
ADMIN_TOKEN = "hardening-admin-" + uuid.uuid4().hex  # never to appear in a response
REDIS_PASSWORD = "redis-pw-" + uuid.uuid4().hex  # part of the policy-store URL: a secret too
GATEWAY_REPLICAS = 2
BODY_TIMEOUT_S = 3.0  # TANDEM_BODY_TIMEOUT_S of the hardening app (the shipped default: 30 s)
APP_ARGS = {
    "request_timeout_s": 8,
    "client_timeouts": True,  # x-tandem-timeout-s: test_cancellation ends a request at a deadline it derives from the machine
    "engine": {"threads": 1, "max_batch_size": 8, "max_queue": 64},  # the shipped default
}


class RedisServer:
    """A private redis-server on a fixed port that tests can stop (crash) and start again.
    Append-only with fsync on every write, so a restart keeps the policy and its history."""

    def __init__(self, directory: Path, password: str):
        self.exe = redis_server_binary()
        self.dir, self.password, self.port = directory, password, free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def bare_url(self) -> str:
        """Without the password: the app takes it from TANDEM_REDIS_PASSWORD, as docs/operations.md says to deploy."""
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=1, decode_responses=True)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--requirepass", self.password],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while True:
            try:
                self.client().ping()
                return
            except Exception:
                assert time.time() < deadline, "private redis-server did not start in 10 s"
                time.sleep(0.05)

    def crash(self) -> None:
        """SIGKILL: an outage, not a clean shutdown."""
        self.proc.kill()
        self.proc.wait(timeout=10)


# Package scope: the app and its Redis stop when tests/hardening ends, not at the session's end: the
# worker goes on with other files after the Ray group, and an idle app with two Gateway replicas
# takes about a sixth of a core (tests/app/conftest.py) that those files need.
@pytest.fixture(scope="package")
def hardening_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"), REDIS_PASSWORD)
    server.start()
    yield server
    if server.proc and server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait(timeout=10)




@contextlib.contextmanager
def child_app(args: dict, out: Path, env: dict[str, str] | None = None, drop_env: tuple[str, ...] = (), gateway_replicas: int = 1):
    """The app (tests/hardening/serve_app.py, start_app) in its own process and Ray cluster, on a
    free port; yields (url, port) once /ready answers and serve_app.py has printed READY (after its
    SESSION_DIR, which the log readers need: /ready answers a moment before), stops it (SIGTERM,
    then SIGKILL) after."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and k not in drop_env} | {
        "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO),
    } | (env or {})
    log = open(out / "serve_app.log", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen([sys.executable, "-m", "tests.hardening.serve_app", str(port), json.dumps(args), str(gateway_replicas)],
                            cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 420  # minutes on a busy two-core machine
        while True:
            assert proc.poll() is None, f"the app exited ({proc.returncode}); see {out / 'serve_app.log'}"
            try:
                if httpx.get(f"{url}/ready", timeout=5).status_code == 200 and "READY" in (out / "serve_app.log").read_text().splitlines():
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, f"the app did not get ready in 420 s; see {out / 'serve_app.log'}"
            time.sleep(0.5)
        yield url, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="package")
def hardened_app(tiny_checkpoint, hardening_redis, tmp_path_factory):
    out = tmp_path_factory.mktemp("hardened-app")
    prefix = f"tandem-hardening-{uuid.uuid4().hex[:8]}:"
    args = APP_ARGS | {"checkpoint": str(tiny_checkpoint), "policy_source": hardening_redis.bare_url, "key_prefix": prefix,
                       "telemetry": f"file:{out / 'telemetry.jsonl'}"}
    # two Gateway replicas, as serve_config.yaml runs: a killed one's new requests go to the other
    # the body deadline short, so test_slow_clients.py stays short (every other test's body arrives at once)
    env = {"TANDEM_ADMIN_TOKEN": ADMIN_TOKEN, "TANDEM_REDIS_PASSWORD": hardening_redis.password, "TANDEM_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S)}
    with child_app(args, out, env, drop_env=("TANDEM_MAX_HEADER_BYTES",), gateway_replicas=GATEWAY_REPLICAS) as (url, port):
        yield {"url": url, "port": port, "prefix": prefix, "dir": out, "redis": hardening_redis}


@pytest.fixture(scope="package")
def app_url(hardened_app) -> str:
    return hardened_app["url"]


@pytest.fixture(scope="session")
def admin():
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def session_dir(app_dir: Path) -> Path:
    """The Ray session directory of the hardening app (serve_app.py prints it)."""
    lines = (app_dir / "serve_app.log").read_text().splitlines()
    return Path(next(line.split(" ", 1)[1] for line in lines if line.startswith("SESSION_DIR ")))


def app_logs(app_dir: Path, since: dict[str, int] | None = None) -> dict[str, str]:
    """Every log the app's run wrote, by path: the driver's, Ray's own, each replica's Serve log and
    each worker's stdout/stderr (logs/worker-*.out|err: where Tandem's own loggers and an uncaught
    traceback of any replica, proxy or controller go). With `since` (`log_sizes`' answer), only what
    each file gained after it: what the app wrote during a test, whatever ran before it."""
    files = [app_dir / "serve_app.log", *(p for p in (session_dir(app_dir) / "logs").rglob("*")
                                           if p.is_file() and p.suffix in (".log", ".out", ".err", ".txt"))]
    logs = {}
    for p in files:
        with open(p, "rb") as f:
            f.seek((since or {}).get(str(p), 0))
            logs[str(p)] = f.read().decode(errors="replace")
    return logs


def log_sizes(app_dir: Path) -> dict[str, int]:
    """The size of every log `app_logs` reads, now: pass it as `since`."""
    return {path: Path(path).stat().st_size for path in app_logs(app_dir)}


def python_logs(logs: dict[str, str]) -> dict[str, str]:
    """The logs the app's Python processes write (the driver, every Serve replica, proxy and controller,
    every worker's stdout and stderr), without Ray's own daemons' (raylet, GCS, dashboard agents)."""
    return {path: text for path, text in logs.items()
            if path.endswith("serve_app.log") or "/logs/serve/" in path or Path(path).name.startswith("worker-")}


def stats_by_replica(url: str) -> dict[int, dict]:
    """/admin/stats of every Gateway replica, by pid."""
    from tandem.bench.chaos import Admin

    seen: dict[int, dict] = {}
    for _ in range(10):
        seen |= Admin(url, ADMIN_TOKEN).every_replica(rounds=1)
        if len(seen) == GATEWAY_REPLICAS:
            return seen
    raise AssertionError(f"saw {len(seen)} of {GATEWAY_REPLICAS} Gateway replicas in 10 bursts of admin calls")


def admin_stats(url: str) -> dict:
    r = httpx.get(f"{url}/admin/stats", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()
