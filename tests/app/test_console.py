"""The operators' console in a real browser: Playwright driving Debian's Chromium (headless) against
the running app. Sign in with the token, watch a decision appear, edit the policy with inline
validation, apply it and see the next request follow it, see a stale apply refused, roll back.

Screenshots go to $TANDEM_SCREENSHOTS when set (docs/images refreshes the ones in
docs/operations.md), else to the test's temporary directory."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from tests.app.conftest import ADMIN_TOKEN

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
TIMEOUT_MS = 30_000  # a busy 2-core machine polls and renders slowly


def chat(base_url, content="Classify the review as positive or negative: great phone.", model="tandem", max_tokens=6):
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Chromium is missing: scripts/test.sh installs Debian's chromium package"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


@pytest.fixture
def shots(tmp_path):
    folder = Path(os.environ.get("TANDEM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser, base_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    context = browser.new_context(viewport={"width": 1440, "height": 1100})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base_url}/console")
    yield page
    context.close()
    assert not errors, f"the console threw: {errors}"


def sign_in(page, token=ADMIN_TOKEN):
    page.fill("#token", token)
    page.click("#login")


def test_the_console_page_is_self_contained_and_its_data_needs_the_token(base_url):
    """(Without an admin token the console is off: tests/hardening/test_admin_security.py.)"""
    r = httpx.get(f"{base_url}/console", timeout=10)
    assert r.status_code == 200 and "Tandem console" in r.text
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert "<script>" not in r.text and "http" not in r.text  # no inline script (the CSP blocks it), nothing fetched elsewhere
    for name in ("console.js", "vendor/uPlot.iife.min.js", "vendor/js-yaml.umd.min.js"):
        asset = httpx.get(f"{base_url}/console/static/{name}", timeout=10)
        assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript")
    for name in ("../../admin.py", "vendor/LICENSES.txt", "nothing.js"):
        missing = httpx.get(f"{base_url}/console/static/{name}", timeout=10)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert httpx.get(f"{base_url}/admin/decisions", timeout=10).status_code == 401


def test_an_operator_signs_in_watches_decisions_and_changes_the_policy(base_url, admin_headers, page, shots, policy_restored):
    from playwright.sync_api import expect

    # start from a stored version (a fresh store serves the default, version 0, from no history)
    live = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
    if live["version"] == 0:
        base = {k: v for k, v in live.items() if k != "version"}
        stored = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, timeout=10,
                            json={"policy": base, "expect_version": 0, "note": "console test: the default, stored"})
        assert stored.status_code == 200, stored.text

    sign_in(page, "not-the-token")
    expect(page.locator("#login-error")).to_have_text("Wrong admin token.")
    sign_in(page)
    expect(page.locator("#console-view")).to_be_visible()
    expect(page.locator("#policy-version")).not_to_have_text("?")

    # a request shows up as a row with the mode it was served in
    answer = chat(base_url)
    row = page.locator(f'#decisions tr[data-request-id="{answer.json()["id"]}"]')
    expect(row).to_have_attribute("data-mode", answer.headers["x-tandem-mode"])
    expect(row).to_contain_text(answer.headers["x-tandem-route-reason"])
    for model in ("tandem-block", "tandem-verified", "tandem-ar", "tandem"):  # every mode, for the charts
        chat(base_url, "Summarize: the meeting moved to Friday because the room was booked.", model=model, max_tokens=12)
    expect(page.locator("#modes tbody tr").first).to_be_visible()
    page.screenshot(path=str(shots / "console-overview.png"), full_page=True)

    editor = page.locator("#policy-editor")
    start_version = int(page.locator("#policy-version").inner_text())
    policy = yaml.safe_load(editor.input_value())
    assert "version" not in policy and "task_modes" in policy

    # an invalid edit is explained inline, before anything is applied
    editor.fill(yaml.safe_dump(policy | {"confidence_floor": 7, "task_modes": policy["task_modes"] | {"extract": "teleport"}}, sort_keys=False))
    validation = page.locator("#policy-validation")
    expect(validation).to_contain_text("confidence_floor")
    expect(validation).to_contain_text("task_modes.extract")
    expect(page.locator("#policy-apply")).to_be_disabled()
    page.locator("#policy-editor").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "console-invalid-policy.png"), full_page=True)
    editor.fill("task_modes: [unclosed")
    expect(validation).to_contain_text("YAML")

    # a valid edit applies as a new version, and the next request follows it
    all_ar = policy | {"task_modes": {t: "ar" for t in policy["task_modes"]}, "fallback_mode": "ar", "description": "console test: all AR"}
    editor.fill(yaml.safe_dump(all_ar, sort_keys=False))
    expect(validation).to_contain_text("Valid")
    page.fill("#policy-note", "console test: everything on AR")
    page.click("#policy-apply")
    expect(page.locator("#policy-message")).to_contain_text("Applied: version")
    version = int(page.locator("#policy-version").inner_text())
    assert version > start_version
    followed = chat(base_url)
    assert followed.headers["x-tandem-mode"] == "ar" and followed.headers["x-tandem-policy-version"] == str(version)
    expect(page.locator(f'#decisions tr[data-request-id="{followed.json()["id"]}"]')).to_have_attribute("data-mode", "ar")
    history_row = page.locator(f'#history tr[data-version="{version}"]')
    expect(history_row).to_contain_text("console test: everything on AR")
    expect(history_row).to_contain_text("fallback_mode")  # the diff against the version before

    # an apply from a stale version is refused and shown; the edit stays in the editor
    elsewhere = httpx.post(f"{base_url}/admin/policy", headers=admin_headers, timeout=10,
                           json={"patch": {"description": "changed elsewhere"}, "expect_version": version})
    assert elsewhere.status_code == 200, elsewhere.text
    stale_edit = yaml.safe_dump(all_ar | {"description": "console test: a stale edit"}, sort_keys=False)
    editor.fill(stale_edit)
    expect(validation).to_contain_text("Valid")
    page.click("#policy-apply")
    message = page.locator("#policy-message")
    expect(message).to_contain_text("Refused, the policy changed meanwhile")
    expect(message).to_contain_text(f"current version is {version + 1}")
    assert editor.input_value() == stale_edit
    live = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
    assert live["version"] == version + 1 and live["description"] == "changed elsewhere"
    page.screenshot(path=str(shots / "console-stale-apply.png"), full_page=True)

    # roll back to the version the operator started from
    page.click("#policy-reload")
    expect(page.locator("#policy-version")).to_have_text(str(version + 1))
    # the reload is done when the editor holds the live policy (the version above is the poll's, shown
    # before): a rollback clicked sooner compares against the stale version and is refused
    expect(editor).to_have_value(re.compile("changed elsewhere"))
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f'#history tr[data-version="{start_version}"] button.rollback').click()
    expect(message).to_contain_text(f"Rolled back to version {start_version}")
    live = httpx.get(f"{base_url}/admin/policy", headers=admin_headers, timeout=10).json()["policy"]
    assert live["version"] == version + 2
    assert {k: v for k, v in live.items() if k != "version"} == policy
    assert chat(base_url).headers["x-tandem-policy-version"] == str(version + 2)
