"""`/v1/models` lists what the live policy serves: its model aliases, the names `Router.decide` accepts."""

import httpx

from tests.helpers import wait_until


def models(base_url) -> list[str]:
    return [m["id"] for m in httpx.get(f"{base_url}/v1/models", timeout=10).json()["data"]]


def test_the_models_listed_are_the_policys_aliases(base_url, admin_headers):
    current = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
    assert models(base_url) == sorted(current["forcing"]["model_aliases"])
    aliases = current["forcing"]["model_aliases"] | {"tandem-fast": "block"}
    added = current | {"forcing": current["forcing"] | {"model_aliases": aliases}, "description": "test: an alias more"}
    r = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, timeout=10, json={"policy": added, "expect_version": current["version"]})
    assert r.status_code == 200, r.text
    try:
        wait_until(lambda: "tandem-fast" in models(base_url), timeout_s=30.0, what="the new alias listed (the policy at every Gateway)")
        assert httpx.get(f"{base_url}/v1/models/tandem-fast", timeout=10).status_code == 200
        chat = httpx.post(f"{base_url}/v1/chat/completions", timeout=60, json={
            "model": "tandem-fast", "max_tokens": 4, "messages": [{"role": "user", "content": "Label: great phone."}]})
        assert chat.status_code == 200 and chat.headers["x-tandem-mode"] == "block"
    finally:
        latest = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
        back = current | {"version": latest["version"]}
        r = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, timeout=10, json={"policy": back, "expect_version": latest["version"]})
        assert r.status_code == 200, r.text
    wait_until(lambda: "tandem-fast" not in models(base_url), timeout_s=30.0, what="the alias gone (the policy back at every Gateway)")
    missing = httpx.get(f"{base_url}/v1/models/tandem-fast", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
