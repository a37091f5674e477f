"""Admin security: off (404) without a token; with one, a missing, malformed or wrong bearer is
401 (same-length near-misses included: the comparison is constant-time and exact); policy writes
with a stale version lose (409) even when racing; no admin response echoes a secret."""

from __future__ import annotations

import asyncio
import shutil

import httpx
import pytest

from tests.hardening.conftest import ADMIN_TOKEN, REDIS_PASSWORD

ADMIN_ROUTES = [
    ("GET", "/admin/policy"), ("POST", "/admin/policy/validate"), ("POST", "/admin/policy"),
    ("GET", "/admin/policy/history"), ("POST", "/admin/policy/rollback"), ("GET", "/admin/stats"), ("GET", "/admin/decisions"),
]
CONSOLE_ROUTES = [("GET", "/console"), ("GET", "/console/"), ("GET", "/console/static/console.js")]  # the page: no data, but off with the API
SECRETS = (ADMIN_TOKEN, REDIS_PASSWORD)


def near_misses(token: str) -> list[str]:
    """Wrong tokens: same length (first, middle, last character changed; case), prefixes, extensions."""
    flip = lambda s, i: s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1 :]  # noqa: E731
    return [flip(token, 0), flip(token, len(token) // 2), flip(token, len(token) - 1), token.upper(),
            token[:-1], token + "x", token[: len(token) // 2], " " + token]


def assert_no_secret(r: httpx.Response) -> None:
    text = r.text + "".join(f"{k}: {v}\n" for k, v in r.headers.items())
    for secret in SECRETS:
        assert secret not in text, f"{r.request.method} {r.request.url.path} ({r.status_code}) echoes a secret"


def test_admin_api_is_off_without_a_token(tmp_path, monkeypatch):
    """The real FastAPI app and Gateway in-process (fake engines, no Ray): with the token variable
    unset, every admin route and the console are 404 whatever the client sends."""
    from router.gateway.orchestration import Gateway, replica_gateway as _gateway
    from router.gateway.ingress import api

    monkeypatch.delenv("TANDEM_HARDENING_NO_TOKEN", raising=False)
    policy = tmp_path / "policy.yaml"
    shutil.copy(__import__("policies.stores", fromlist=["x"]).DEFAULT_POLICY_PATH, policy)
    gw = Gateway(None, None, policy_source=str(policy), admin_token_env="TANDEM_HARDENING_NO_TOKEN")
    api.dependency_overrides[_gateway] = lambda: gw
    try:
        async def calls():
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
                out = []
                for method, path in ADMIN_ROUTES + CONSOLE_ROUTES:
                    for headers in ({}, {"Authorization": "Bearer anything"}, {"Authorization": "Bearer "}):
                        out.append(await client.request(method, path, headers=headers, json={"policy": {}}))
                out.append(await client.get("/health"))
                return out

        responses = asyncio.run(calls())
    finally:
        api.dependency_overrides.pop(_gateway, None)
    *admin, health = responses
    assert health.status_code == 200
    for r in admin:
        assert r.status_code == 404, (r.request.url.path, r.status_code)
        assert r.json()["error"]["code"] == "admin_disabled"


@pytest.mark.parametrize("method,path", ADMIN_ROUTES)
def test_every_admin_route_refuses_missing_and_wrong_tokens(app_url, method, path):
    tries = [{}, {"Authorization": "Bearer"}, {"Authorization": ADMIN_TOKEN}, {"Authorization": f"Basic {ADMIN_TOKEN}"}, {"Authorization": f"Token {ADMIN_TOKEN}"},
             {"Authorization": f"Bearer{ADMIN_TOKEN}"}, {"X-Admin-Token": ADMIN_TOKEN}]
    tries += [{"Authorization": f"Bearer {wrong}"} for wrong in near_misses(ADMIN_TOKEN)]
    with httpx.Client(base_url=app_url, timeout=10) as client:
        for headers in tries:
            r = client.request(method, path, headers=headers, json={"policy": {}, "version": 1}, params={"token": ADMIN_TOKEN})
            assert r.status_code == 401, (headers, r.status_code, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json()["error"]["type"] == "authentication_error"
            assert_no_secret(r)
        ok = client.get("/admin/policy", headers={"Authorization": f"bearer {ADMIN_TOKEN}"})  # the scheme is case-insensitive
        assert ok.status_code == 200


def test_racing_writers_with_the_same_version_one_wins(app_url, admin):
    """Eight clients apply a policy with the same expect_version at once: exactly one succeeds,
    the others get 409; a stale rollback is 409 too; then the original policy is restored."""
    current = httpx.get(f"{app_url}/admin/policy", headers=admin, timeout=10).json()["policy"]
    version = current["version"]

    async def race():
        async with httpx.AsyncClient(base_url=app_url, headers=admin, timeout=30) as client:
            bodies = [{"policy": current | {"description": f"writer {i}"}, "expect_version": version} for i in range(8)]
            return await asyncio.gather(*(client.post("/admin/policy", json=b) for b in bodies))

    responses = asyncio.run(race())
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 7, statuses
    for r in responses:
        if r.status_code == 409:
            assert r.json()["error"]["type"] == "invalid_request_error" and r.json()["error"]["message"]
    stale = httpx.post(f"{app_url}/admin/policy/rollback", headers=admin, json={"version": version + 1, "expect_version": version}, timeout=10)
    assert stale.status_code == 409
    restored = httpx.post(f"{app_url}/admin/policy", headers=admin, timeout=10,
                          json={"policy": current, "expect_version": version + 1, "note": "hardening: restore"})
    assert restored.status_code == 200, restored.text


def test_no_admin_response_echoes_a_secret(app_url, admin):
    """The admin token and the Redis password (in the policy-store URL) appear in no body or header:
    reads, validation errors, conflicts, not-found, auth failures, readiness."""
    with httpx.Client(base_url=app_url, timeout=10) as client:
        current = client.get("/admin/policy", headers=admin).json()["policy"]
        responses = [
            client.get("/admin/policy", headers=admin),
            client.get("/admin/policy/history", headers=admin),
            client.get("/admin/stats", headers=admin),
            client.post("/admin/policy/validate", headers=admin, json={"policy": current}),
            client.post("/admin/policy/validate", headers=admin, json={"policy": {"task_modes": {"x": "warp"}, "steps": -1}}),
            client.post("/admin/policy", headers=admin, json={"policy": current, "expect_version": -5}),
            client.post("/admin/policy/rollback", headers=admin, json={"version": 10**9}),
            client.post("/admin/policy/rollback", headers=admin, json={}),
            client.post("/admin/policy", headers=admin, content=b"{not json"),
            client.get("/admin/stats", headers={"Authorization": f"Bearer {ADMIN_TOKEN[:-1]}"}),
            client.get("/ready"),
            client.get("/openapi.json"),
        ]
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 400, 409, 404, 400, 400, 401, 200, 200]
    for r in responses:
        assert_no_secret(r)
    store = responses[0].json()["store"]
    # the app takes the password from TANDEM_REDIS_PASSWORD (hardening conftest); a password in the
    # URL is shown masked (tests/policies/test_redis_store.py)
    assert store["store"] == "redis" and store["source"].startswith("redis://127.0.0.1:"), store


def test_versions_must_be_integers(app_url, admin):
    """`"4"` once got 409 "expected 4 but current is 4"; `true` got 404 "no policy version True"."""
    current = httpx.get(f"{app_url}/admin/policy", headers=admin, timeout=10).json()["policy"]
    for path, body in (("/admin/policy", {"policy": current, "expect_version": str(current["version"])}),
                       ("/admin/policy/rollback", {"version": True}), ("/admin/policy/rollback", {"version": "1"})):
        r = httpx.post(app_url + path, headers=admin, json=body, timeout=10)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_value" and "integer" in r.json()["error"]["message"]
    assert httpx.get(f"{app_url}/admin/policy", headers=admin, timeout=10).json()["policy"]["version"] == current["version"]


def test_a_policy_write_states_every_field_or_says_it_is_a_patch(app_url, admin):
    """`POST /admin/policy {}` once wrote the schema defaults as a new live version on every
    replica. Now an empty or partial policy is a 400 naming each missing field and nothing
    changes; a patch changes only what it names; then the original policy is restored."""
    current = httpx.get(f"{app_url}/admin/policy", headers=admin, timeout=10).json()["policy"]
    version = current["version"]
    with httpx.Client(base_url=app_url, headers=admin, timeout=10) as client:
        for body in ({}, {"policy": {}}, {"policy": {"steps": 16}, "expect_version": version}):
            r = client.post("/admin/policy", json=body)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "invalid_policy" and "task_modes: missing" in r.json()["error"]["message"]
            assert_no_secret(r)
        assert client.get("/admin/policy").json()["policy"] == current
        r = client.post("/admin/policy", json={"patch": {"description": "hardening: a patch"}, "expect_version": version})
        assert r.status_code == 200, r.text
        assert r.json()["policy"] == current | {"description": "hardening: a patch", "version": version + 1}
        restored = client.post("/admin/policy", json={"policy": current, "expect_version": version + 1, "note": "hardening: restore"})
        assert restored.status_code == 200, restored.text
