"""Tandem on a Ray cluster of two nodes: a head (the HTTP proxy and the Gateway) and a worker (the
engine replicas), both started with `ray start` on this machine, each with its own resources, on
ports that avoid Redis's 6379. The app is deployed from serve_config.yaml with the placement an
operator would write for GPU nodes (docs/operations.md): custom resources keep the engines on the
worker. Requests go through the head; when the worker's engine replicas are killed, requests are
served (degraded per policy, block -> AR, or by the replica Serve restarted) or fail with a clean
503, and Ray Serve brings the replicas back on the worker."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from signal import SIGKILL

import httpx
import pytest
import yaml

from tandem.local_app import BUSY_MACHINE_SERVE_TIMEOUTS, WORKER_PRIORITY, free_port

pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOKEN = "two-nodes-admin-token"


def ray_start(*args: str, env: dict) -> int:
    """`ray start` in a session of its own; returns the session id its daemons and workers share."""
    ports = [f"--{name}={free_port()}" for name in ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
                                                    "dashboard-agent-grpc-port", "metrics-export-port", "runtime-env-agent-port")]
    start = subprocess.Popen([str(BIN / "ray"), "start", "--node-ip-address=127.0.0.1", "--disable-usage-stats", *ports, *args],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, err = start.communicate(timeout=300)
    assert start.returncode == 0, f"ray start {' '.join(args)} failed:\n{out[-3000:]}\n{err[-3000:]}"
    return start.pid


def kill_sessions(sessions: list[int]) -> None:
    """SIGKILL every process in these sessions: this cluster's daemons and workers and nothing else
    (`ray stop` would stop every Ray cluster on the machine, the test session's own included)."""
    listing = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout.split("\n")
    for line in listing:
        fields = line.split()
        if len(fields) == 2 and int(fields[1]) in sessions and int(fields[0]) != os.getpid():
            try:
                os.kill(int(fields[0]), SIGKILL)
            except ProcessLookupError:
                pass


def two_node_config(port: int) -> dict:
    """serve_config.yaml, with the Gateway on the head and the engines on the worker."""
    config = yaml.safe_load((REPO / "serve_config.yaml").read_text())
    config["proxy_location"] = "HeadOnly"
    config["http_options"] |= {"host": "127.0.0.1", "port": port}
    app = config["applications"][0]
    app["args"]["request_timeout_s"] = 30
    for deployment in app["deployments"]:
        where = {"tandem_head": 0.1} if deployment["name"] == "Gateway" else {"tandem_engines": 1}
        deployment["ray_actor_options"]["resources"] = where
        if deployment["name"] == "Gateway":
            deployment["num_replicas"] = 1  # placement is the point here; one start less on the 1-CPU head
    return config


@pytest.fixture(scope="module")
def cluster():
    temp = Path(tempfile.mkdtemp(prefix="t2n-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    # `ray start --head` turns on Ray's token authentication: every node and the deploying CLI carry the token
    env = os.environ | WORKER_PRIORITY | BUSY_MACHINE_SERVE_TIMEOUTS | {
        "RAY_USAGE_STATS_ENABLED": "0", "TANDEM_ADMIN_TOKEN": TOKEN, "PYTHONPATH": str(REPO),
        "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    gcs = free_port()
    assert gcs != 6379
    address = f"127.0.0.1:{gcs}"
    http = free_port()
    sessions: list[int] = []
    try:
        sessions.append(ray_start("--head", f"--port={gcs}", f"--temp-dir={temp}", "--num-cpus=1", '--resources={"tandem_head": 1}',
                  "--include-dashboard=false", f"--ray-client-server-port={free_port()}", env=env))
        sessions.append(ray_start(f"--address={address}", "--num-cpus=2", '--resources={"tandem_engines": 2}', env=env))
        config = temp / "serve_two_nodes.yaml"
        config.write_text(yaml.safe_dump(two_node_config(http)))
        subprocess.run([str(BIN / "serve"), "run", "--non-blocking", f"--address={address}", str(config)], env=env, cwd=REPO,
                       check=True, capture_output=True, timeout=600)
        url = f"http://127.0.0.1:{http}"
        wait_for(lambda: httpx.get(f"{url}/ready", timeout=5).status_code == 200, 600, "the app did not get ready")
        yield url
    finally:
        kill_sessions(sessions)
        time.sleep(2)


def wait_for(check, seconds: float, what: str):
    deadline, last = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(1)
    raise AssertionError(f"{what} in {seconds:.0f} s (last error: {last!r})")


def stats(url: str) -> dict:
    r = httpx.get(f"{url}/admin/stats", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def chat(url: str, model: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", timeout=60,
                      json={"model": model, "messages": [{"role": "user", "content": "Label the review: great phone."}], "max_tokens": 8})


def test_engines_run_on_the_worker_and_requests_come_through_the_head(cluster):
    s = stats(cluster)
    nodes = {name: load["node"] for name, load in s["engines"].items()}
    assert set(nodes) == {"block", "ar"} and all(nodes.values())
    assert nodes["block"] == nodes["ar"] != s["node"], f"engines on {nodes}, gateway on {s['node']}"
    for model, mode in (("tandem-block", "block"), ("tandem-ar", "ar"), ("tandem-verified", "verified")):
        r = chat(cluster, model)
        assert r.status_code == 200, r.text
        assert r.headers["x-tandem-mode"] == mode and r.json()["choices"][0]["message"]["content"] is not None


def test_killed_engine_replicas_degrade_per_policy_then_come_back(cluster):
    before = stats(cluster)["engines"]
    os.kill(before["block"]["pid"], SIGKILL)
    with ThreadPoolExecutor(4) as pool:  # in flight while the replica is gone
        answers = list(pool.map(lambda _: chat(cluster, "tandem-block"), range(4)))
    for r in answers:
        # served by AR per the policy's on_engine_failure (block -> ar), or by the replica Serve already
        # restarted; never a hang or a bare 500
        assert r.status_code == 200, r.text
        assert (r.headers["x-tandem-mode"], r.headers.get("x-tandem-degraded")) in {("ar", "true"), ("block", None)}

    print("after the block kill:", [(r.headers["x-tandem-mode"], r.headers.get("x-tandem-degraded")) for r in answers])
    os.kill(before["ar"]["pid"], SIGKILL)
    r = chat(cluster, "tandem-ar")
    if r.status_code != 200:  # no engine left to degrade to, unless Serve was already quicker
        assert r.status_code == 503 and r.json()["error"]["type"], r.text

    def back() -> bool:
        ok = chat(cluster, "tandem-block")
        return ok.status_code == 200 and ok.headers["x-tandem-mode"] == "block" and "x-tandem-degraded" not in ok.headers
    wait_for(back, 300, "the block replica did not come back")
    after = stats(cluster)["engines"]
    assert after["block"]["pid"] != before["block"]["pid"] and after["block"]["node"] == before["block"]["node"]
    wait_for(lambda: chat(cluster, "tandem-ar").headers.get("x-tandem-mode") == "ar", 300, "the AR replica did not come back")
    print(json.dumps({"before": {k: v["pid"] for k, v in before.items()}, "after": {k: v["pid"] for k, v in stats(cluster)["engines"].items()}}))
