"""The admin API's policy writes, in process (the real FastAPI app and Gateway, no engines, no
Ray): a write is a full policy or an explicit patch; `{}` is a 400 listing every missing field,
never the schema defaults as a new live version."""

from __future__ import annotations

import asyncio
import shutil

import httpx
import pytest
import yaml

from policies.schema import OPTIONAL_ON_WRITE, Policy
from policies.stores import DEFAULT_POLICY_PATH, FileStore, default_policy

TOKEN = "admin-writes-test-token"
ROUTING_FIELDS = set(Policy.model_fields) - OPTIONAL_ON_WRITE


@pytest.fixture(scope="module")
def gateway():
    """One Gateway for the module (building one loads the router model); each test gives it a store."""
    from router.gateway.orchestration import Gateway, replica_gateway
    from router.gateway.ingress import api

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TANDEM_ADMIN_WRITES_TOKEN", TOKEN)
        gw = Gateway(None, None, policy_source=str(DEFAULT_POLICY_PATH), admin_token_env="TANDEM_ADMIN_WRITES_TOKEN")
    api.dependency_overrides[replica_gateway] = lambda: gw
    yield gw
    api.dependency_overrides.pop(replica_gateway, None)


@pytest.fixture
def admin(gateway, tmp_path):
    """`call(method, path, json=...)` -> the response, against the Gateway on a fresh policy file."""
    from router.gateway.ingress import api

    policy = tmp_path / "policy.yaml"
    shutil.copy(DEFAULT_POLICY_PATH, policy)
    gateway.router.store = FileStore(policy, check_interval_s=0)

    def call(method: str, path: str, **kw) -> httpx.Response:
        async def go():
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway",
                                         headers={"Authorization": f"Bearer {TOKEN}"}) as client:
                return await client.request(method, path, **kw)

        return asyncio.run(go())

    call.file = policy
    return call


def error(r: httpx.Response) -> dict:
    return r.json()["error"]


@pytest.mark.parametrize("body", [{}, {"policy": {}}, {"policy": {"steps": 16}}, {"steps": 16}])
def test_an_empty_or_partial_policy_is_a_400_listing_the_missing_fields(admin, body):
    before = admin.file.read_bytes()
    for path in ("/admin/policy", "/admin/policy/validate"):
        r = admin("POST", path, json=body)
        assert r.status_code == 400, r.text
        assert error(r)["code"] == "invalid_policy"
        named = {line.strip().split(":")[0] for line in error(r)["message"].splitlines() if line.strip().endswith(": missing")}
        stated = set(body.get("policy", body))
        assert named == ROUTING_FIELDS - stated
    assert admin.file.read_bytes() == before, "a refused write changed the live policy"
    assert admin("GET", "/admin/policy").json()["policy"]["version"] == 0


def test_a_full_policy_is_written(admin):
    current = admin("GET", "/admin/policy").json()["policy"]
    r = admin("POST", "/admin/policy", json={"policy": current | {"steps": 20}, "expect_version": 0, "note": "full"})
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 1 and r.json()["policy"]["steps"] == 20


def test_a_patch_is_merged_onto_the_current_policy(admin):
    r = admin("POST", "/admin/policy/validate", json={"patch": {"task_modes": {"extract": "ar"}}})
    assert r.status_code == 200 and r.json()["policy"]["task_modes"]["extract"] == "ar"
    assert admin("GET", "/admin/policy").json()["policy"]["version"] == 0  # validate writes nothing
    r = admin("POST", "/admin/policy", json={"patch": {"confidence_floor": 0.7, "task_modes": {"extract": "ar"}},
                                            "expect_version": 0, "note": "stricter"})
    assert r.status_code == 200, r.text
    want = default_policy().content() | {"confidence_floor": 0.7}
    want["task_modes"] = {**want["task_modes"], "extract": "ar"}
    assert r.json()["version"] == 1 and yaml.safe_load(admin.file.read_text()) == {"version": 1, **want}
    stale = admin("POST", "/admin/policy", json={"patch": {"steps": 4}, "expect_version": 0})
    assert stale.status_code == 409


@pytest.mark.parametrize("body, param", [
    ({"policy": {}, "patch": {"steps": 4}}, "patch"),
    ({"patch": {"steps": 4}, "expect_verison": 0}, "expect_verison"),  # a typo would skip the version check
    ({"patch": {"steps": 4}, "mode": "patch"}, "mode"),
])
def test_a_write_body_with_both_forms_or_an_unknown_field_is_a_400(admin, body, param):
    for path in ("/admin/policy", "/admin/policy/validate"):
        r = admin("POST", path, json=body)
        assert r.status_code == 400 and error(r)["param"] == param, r.text
    assert admin("GET", "/admin/policy").json()["policy"]["version"] == 0


@pytest.mark.parametrize("patch", [{}, {"version": 5}, {"steps": None}, {"steps": 0}, ["steps"]])
def test_a_bad_patch_is_a_400_and_nothing_changes(admin, patch):
    r = admin("POST", "/admin/policy", json={"patch": patch})
    assert r.status_code == 400 and error(r)["code"] == "invalid_policy", r.text
    assert admin("GET", "/admin/policy").json()["policy"]["version"] == 0
