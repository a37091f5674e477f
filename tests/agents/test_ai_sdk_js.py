"""Vercel's AI SDK for JavaScript (`ai` with `@ai-sdk/openai-compatible`, pinned in tests/js/package-lock.json,
installed by scripts/test.sh's `npm ci`) against the agents' app on the shipped model: generateText with
two tools over several steps, generateObject with a zod schema, streamText, a mode forced through the
model id, and an unknown model's error. Each case is one `node tests/js/agent_sdk.mjs CASE` run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).parents[1] / "js"
CASE_TIMEOUT_S = 240  # a few requests on a busy two-core machine


def run_case(url: str, case: str) -> dict:
    node = shutil.which("node")
    assert node, "node (20 or later) is not on the PATH"
    assert (JS / "node_modules" / "ai").is_dir(), "tests/js is not installed: scripts/test.sh runs `npm ci` there"
    done = subprocess.run([node, "agent_sdk.mjs", case], cwd=JS, env=os.environ | {"TANDEM_URL": url}, capture_output=True, text=True,
                          timeout=CASE_TIMEOUT_S)
    assert done.returncode == 0, f"node agent_sdk.mjs {case} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_generate_text_calls_two_tools_over_several_steps(agents_url):
    seen = run_case(agents_url, "tools")
    assert seen["calls"], f"no tool was called: {seen}"
    assert all((c.get("location") or c.get("city") or "").strip() for c in seen["calls"]), seen["calls"]
    steps = seen["steps"]
    assert len(steps) >= 2 and steps[0]["finishReason"] == "tool-calls" and steps[0]["toolResults"] >= 1, steps
    assert not any(s["errors"] for s in steps), f"a tool call's input did not validate: {steps}"
    assert steps[-1]["finishReason"] in ("stop", "length", "tool-calls"), steps
    assert seen["usage"]["inputTokens"] > 0 and seen["usage"]["outputTokens"] > 0


def test_generate_object_returns_an_object_valid_under_the_zod_schema(agents_url):
    seen = run_case(agents_url, "object")
    assert seen["valid"] and set(seen["object"]) == {"name", "city"}, seen
    assert seen["finishReason"] == "stop"


def test_stream_text_arrives_in_parts_with_a_finish_reason(agents_url):
    seen = run_case(agents_url, "stream")
    assert len([p for p in seen["parts"] if p]) >= 2, f"the text came in one part: {seen['parts']}"
    assert "".join(seen["parts"]) == seen["text"] and seen["text"].strip()
    assert seen["finishReason"] in ("stop", "length"), seen
    assert seen["usage"]["outputTokens"] > 0


def test_a_mode_is_forced_through_the_model_id(agents_url):
    seen = run_case(agents_url, "forced")
    assert seen["mode"] == "block" and seen["model"] == "tandem-block", seen
    assert seen["finishReason"] in ("stop", "length")


def test_an_unknown_model_is_an_api_call_error_with_its_status(agents_url):
    seen = run_case(agents_url, "error")
    assert seen["thrown"] and seen["isAPICallError"] and seen["name"] == "AI_APICallError", seen
    assert seen["statusCode"] == 404 and seen["retryable"] is False and "no-such-model" in seen["message"], seen
