"""`POST /admin/route` and `tandem route --url`: the decision the running server would make now."""

import argparse
import json
import subprocess
import sys

import httpx

from tests.app.conftest import ADMIN_TOKEN

ASK = [{"role": "user", "content": "Summarize: the meeting moved to Tuesday because the room was booked."}]


def dry_run(base_url, headers, **body):
    return httpx.post(f"{base_url}/admin/route", json={"model": "tandem", "messages": ASK} | body, headers=headers, timeout=30)


def test_dry_run_needs_the_admin_token(base_url):
    assert dry_run(base_url, {}).status_code == 401
    wrong = dry_run(base_url, {"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"


def test_dry_run_answers_what_a_request_then_gets(base_url, admin_headers):
    decided = dry_run(base_url, admin_headers, max_tokens=24)
    assert decided.status_code == 200, decided.text
    decision = decided.json()
    assert decision["mode"] in ("block", "verified", "ar") and decision["reason"]
    assert decision["load_aware"] is True and set(decision["routing"]["in_flight"]) == {"block", "ar"}  # the live view, applied
    served = httpx.post(f"{base_url}/v1/chat/completions", json={"model": "tandem", "messages": ASK, "max_tokens": 24}, timeout=60)
    assert served.status_code == 200 and served.headers["x-tandem-mode"] == decision["mode"]  # idle server: the same decision
    forced = dry_run(base_url, admin_headers, model="tandem-ar").json()
    assert forced["mode"] == "ar" and forced["rule"] == "forced_model"
    bad = dry_run(base_url, admin_headers, messages=[])  # the same checks as the chat route
    assert bad.status_code == 400 and bad.json()["error"]["param"]


def test_tandem_route_asks_the_server_with_url(base_url):
    from tandem.commands import _route_on_server

    args = argparse.Namespace(admin_token=ADMIN_TOKEN, system=None, model="tandem-verified", max_tokens=None, json_mode=False,
                              api_key=None, request_id=None, url=f"{base_url}/v1")
    decision = _route_on_server(args, "Plan: search the web, then email Bob.", {})
    assert decision["mode"] == "verified" and decision["load_aware"] is True
    # without --url: decided locally, and it says the load-aware step was not applied
    out = subprocess.run([sys.executable, "-m", "tandem.main", "route", "Plan: search the web, then email Bob.", "--model", "tandem-ar"],
                         capture_output=True, text=True, timeout=120)
    local = json.loads(out.stdout)
    assert local["mode"] == "ar" and local["load_aware"] is False and "not applied" in local["note"]

