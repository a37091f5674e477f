"""Slow and oversized clients are bounded at the HTTP layer (issue 18 item 5): a body that trickles
in is answered 408 and its connection closed once the body deadline passes; header lines over the
limit are answered 431 and closed; a normal request works afterwards. Against a real app (Ray
Serve's proxy in front of the Gateway: the hardening app) over raw sockets, with a short body
deadline (TANDEM_BODY_TIMEOUT_S) so the test stays short; the proxy's limits in serve_config.yaml match
what tandem.local_app gives every test app."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.hardening.conftest import BODY_TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]
SLACK_S = 10.0  # a loaded two-core machine: the answer may come this much after the deadline
CHAT = {"model": "tandem", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def slow_app(hardened_app):
    """The hardening app: its replicas inherit a short body deadline (TANDEM_BODY_TIMEOUT_S)."""
    return {"url": hardened_app["url"], "port": hardened_app["port"]}


# ---- a raw client ----------------------------------------------------------------------------------------


def request_head(method: str, path: str, port: int, extra: str = "", content_length: int | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{extra}"
    if content_length is not None:
        head += f"Content-Length: {content_length}\r\n"
    return (head + "\r\n").encode()


def read_until_closed(sock: socket.socket, until: float, trickle: bytes = b"", every_s: float = 0.5) -> tuple[bytes, bool]:
    """Read what the server sends until it closes the connection or `until` (monotonic) passes,
    sending `trickle` one byte every `every_s` meanwhile. Returns (bytes read, closed by server)."""
    data, next_send = b"", time.monotonic()
    while time.monotonic() < until:
        if trickle and time.monotonic() >= next_send:
            try:
                sock.sendall(trickle[:1])
            except (BrokenPipeError, ConnectionResetError):
                return data + _drain(sock), True
            trickle, next_send = trickle[1:], next_send + every_s
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return data, True
            if not chunk:
                return data, True
            data += chunk
    return data, False


def _drain(sock: socket.socket) -> bytes:
    try:
        sock.settimeout(1)
        return sock.recv(65536)
    except OSError:
        return b""


def parse_response(raw: bytes) -> tuple[int, dict, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, json.loads(body[: int(headers["content-length"])])


def assert_openai_error(body: dict, code: str) -> None:
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error", body


def assert_still_serving(url: str) -> None:
    r = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["role"] == "assistant"


# ---- the tests -------------------------------------------------------------------------------------------


def test_a_body_sent_a_byte_at_a_time_is_408_and_closed_at_the_deadline(slow_app):
    body = json.dumps(CHAT).encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow_app["port"]), timeout=5) as sock:
        sock.sendall(request_head("POST", "/v1/chat/completions", slow_app["port"], content_length=len(body)))
        raw, closed = read_until_closed(sock, started + BODY_TIMEOUT_S + SLACK_S, trickle=body, every_s=0.5)
    elapsed = time.monotonic() - started
    assert raw, f"no answer in {elapsed:.1f} s"
    status, headers, err = parse_response(raw)
    assert status == 408, raw
    assert_openai_error(err, "request_timeout")
    assert headers.get("connection") == "close"
    assert closed, "the server kept the connection open after its 408"
    assert BODY_TIMEOUT_S - 0.5 <= elapsed <= BODY_TIMEOUT_S + SLACK_S, elapsed  # the deadline, not something sooner
    assert_still_serving(slow_app["url"])


def test_headers_then_silence_is_408(slow_app):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow_app["port"]), timeout=5) as sock:
        sock.sendall(request_head("POST", "/v1/completions", slow_app["port"], content_length=100))
        raw, closed = read_until_closed(sock, started + BODY_TIMEOUT_S + SLACK_S)
    assert raw and parse_response(raw)[0] == 408 and closed, raw


def test_a_slow_body_that_arrives_within_the_deadline_is_served(slow_app):
    body = json.dumps(CHAT).encode()
    chunks = [body[i: i + 20] for i in range(0, len(body), 20)]
    with socket.create_connection(("127.0.0.1", slow_app["port"]), timeout=30) as sock:
        sock.sendall(request_head("POST", "/v1/chat/completions", slow_app["port"], extra="Connection: close\r\n",
                                  content_length=len(body)))
        for chunk in chunks:  # the whole body over about a second: slow, but within the deadline
            time.sleep(1.0 / len(chunks))
            sock.sendall(chunk)
        raw, _ = read_until_closed(sock, time.monotonic() + 30)
    status, _, answer = parse_response(raw)
    assert status == 200, raw
    assert answer["object"] == "chat.completion"


def test_a_100_kb_header_is_431_and_closed(slow_app):
    pad = "a" * 100_000
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow_app["port"]), timeout=5) as sock:
        sock.sendall(request_head("GET", "/v1/models", slow_app["port"], extra=f"X-Pad: {pad}\r\n"))
        raw, closed = read_until_closed(sock, started + SLACK_S)
    status, headers, err = parse_response(raw)
    assert status == 431, raw
    assert_openai_error(err, "request_headers_too_large")
    assert headers.get("connection") == "close" and closed
    assert_still_serving(slow_app["url"])


def test_headers_within_the_limit_are_served(slow_app):
    r = httpx.get(f"{slow_app['url']}/v1/models", headers={"x-pad": "a" * 16_000}, timeout=10)
    assert r.status_code == 200, r.text
    r = httpx.get(f"{slow_app['url']}/v1/models", headers={f"x-pad-{i}": "a" * 8_000 for i in range(5)}, timeout=10)
    assert r.status_code == 431  # the limit is on all header lines together, not on each


def test_a_stream_outlives_the_body_deadline():
    """In process: once the body is in, `receive()` is not bounded (a streamed response waits on it
    for the client's disconnect far longer than the body deadline)."""
    from router.gateway.read_limits import ReadLimits

    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]
    sent: list[dict] = []

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.sleep(0.3)  # three body deadlines
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def app(_scope, receive, send):
        assert (await receive())["body"] == b"{}"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        assert (await receive())["type"] == "http.disconnect"
        await send({"type": "http.response.body", "body": b"done"})

    scope = {"type": "http", "method": "POST", "headers": [(b"content-type", b"application/json")]}
    asyncio.run(ReadLimits(app, body_timeout_s=0.1)(scope, receive, send))
    assert [m.get("status") for m in sent] == [200, None] and sent[-1]["body"] == b"done"


def test_local_app_gives_tests_the_proxy_limits_of_the_shipped_configs():
    from tandem.local_app import HTTP_LIMITS

    for name in ("serve_config.yaml", "serve_config.gpu.yaml"):
        http = yaml.safe_load((REPO / name).read_text())["http_options"]
        assert {k: http.get(k) for k in HTTP_LIMITS} == HTTP_LIMITS, name
