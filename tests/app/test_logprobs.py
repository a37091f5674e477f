"""Logprobs through the served app: the model's AR log-probability of every output token, with
the most likely alternatives, in AR and verified mode; a block decision moves to constrained_mode."""

import math

import httpx
import openai
import pytest

ASK = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=90)


def test_chat_logprobs_cover_every_token_in_ar_and_verified(client):
    answers = {}
    for model in ("tandem-ar", "tandem-verified"):
        r = client.chat.completions.create(model=model, messages=ASK, max_tokens=6, logprobs=True, top_logprobs=3)
        entries = r.choices[0].logprobs.content
        assert entries and len(entries) == r.usage.completion_tokens  # an empty answer would pass every check below
        for e in entries:
            assert e.logprob <= 0 and len(e.top_logprobs) == 3
            assert e.top_logprobs[0].logprob >= e.logprob - 1e-5  # the best alternative is at least as likely
            assert bytes(e.bytes).decode("utf-8", "replace") == e.token
        answers[model] = [(e.token, round(e.logprob, 4)) for e in entries]
    assert answers["tandem-ar"] == answers["tandem-verified"]  # greedy: the same tokens, the same distribution


def test_logprobs_asked_of_block_are_served_in_ar(client):
    raw = client.chat.completions.with_raw_response.create(model="tandem-block", messages=ASK, max_tokens=4, logprobs=True)
    assert (raw.headers["x-tandem-mode"], raw.headers["x-tandem-route-reason"]) == ("ar", "constrained")
    assert raw.parse().choices[0].logprobs.content


def test_streamed_logprobs_join_to_the_whole(client):
    whole = client.chat.completions.create(model="tandem-ar", messages=ASK, max_tokens=6, logprobs=True)
    joined = []
    for chunk in client.chat.completions.create(model="tandem-ar", messages=ASK, max_tokens=6, logprobs=True, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            joined += chunk.choices[0].logprobs.content
    assert joined and [(e.token, e.logprob) for e in joined] == [(e.token, e.logprob) for e in whole.choices[0].logprobs.content]


def test_completion_logprobs_use_the_legacy_shape(base_url):
    r = httpx.post(f"{base_url}/v1/completions", json={"model": "tandem-ar", "prompt": "Hello", "max_tokens": 5, "logprobs": 2}, timeout=60)
    lp = r.json()["choices"][0]["logprobs"]
    assert lp["tokens"] and len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == r.json()["usage"]["completion_tokens"]
    assert all(len(top) <= 2 and all(v <= 0 for v in top.values()) for top in lp["top_logprobs"])
    assert all(math.isfinite(v) and v <= 0 for v in lp["token_logprobs"])
    assert lp["text_offset"][0] == 0


def test_bad_logprobs_are_400s(base_url):
    url = f"{base_url}/v1/chat/completions"
    r = httpx.post(url, json={"model": "tandem", "messages": ASK, "top_logprobs": 3}, timeout=30)
    assert r.status_code == 400 and "top_logprobs needs logprobs" in r.json()["error"]["message"]
    r = httpx.post(url, json={"model": "tandem", "messages": ASK, "logprobs": True, "top_logprobs": 21}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "top_logprobs"
