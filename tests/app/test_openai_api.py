"""The served app through the official OpenAI client and plain HTTP: what agent frameworks rely on."""

import json
import time

import httpx
import jsonschema
import openai
import pytest

MSG = [{"role": "user", "content": "Extract the name and city as JSON: Alice Smith lives in Paris."}]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=60)


def test_models_lists_the_four_aliases(client):
    assert {m.id for m in client.models.list()} == {"tandem", "tandem-block", "tandem-verified", "tandem-ar"}


def test_chat_completion_with_decision_headers_and_body(client):
    raw = client.chat.completions.with_raw_response.create(model="tandem", messages=MSG, max_tokens=6, seed=1)
    completion = raw.parse()
    assert raw.headers["x-tandem-mode"] in ("block", "verified", "ar")
    assert raw.headers["x-tandem-task"]
    assert raw.headers["x-tandem-policy-version"].isdigit()
    assert raw.headers["x-request-id"] == completion.id
    choice = completion.choices[0]
    assert choice.message.role == "assistant" and choice.message.content is not None
    assert 0 < completion.usage.completion_tokens <= 6
    # no grammar, no stop strings: the answer ends at a stop token, or at max_tokens as "length"
    assert choice.finish_reason == ("length" if completion.usage.completion_tokens == 6 else "stop")
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    tandem = completion.model_extra["tandem"]
    assert tandem["mode"] == raw.headers["x-tandem-mode"] and tandem["reason"]
    # the answer's tokens over the model calls after the prefill (engines.types.DecodeStats)
    assert tandem["tokens_per_forward"] == round(completion.usage.completion_tokens / max(1, tandem["forwards"] - 1), 3)


@pytest.mark.parametrize("model,mode", [("tandem-block", "block"), ("tandem-verified", "verified"), ("tandem-ar", "ar")])
def test_model_alias_forces_the_mode(client, model, mode):
    raw = client.chat.completions.with_raw_response.create(model=model, messages=MSG, max_tokens=5, seed=0)
    assert raw.headers["x-tandem-mode"] == mode
    tandem = raw.parse().model_extra["tandem"]
    assert tandem["rule"] == "forced_model"
    if mode == "ar":
        assert tandem["steps"] == []
    else:
        assert tandem["steps"], "block and verified report steps per canvas"


def test_a_greedy_block_answer_repeats_without_a_seed(client):
    """Block mode draws canvas noise at any temperature; a greedy request that names no seed gets a
    fixed one (router.gateway.calls.GREEDY_SEED), so asking again gives the same answer."""
    ask = {"model": "tandem-block", "messages": MSG, "max_tokens": 8}
    answers = [client.chat.completions.create(**ask).choices[0].message.content for _ in range(2)]
    assert answers[0] == answers[1] and answers[0]


# Seeds at which the tiny random model, sampled near-greedily, writes its end-of-sequence token
# within 60 tokens (measured on the engine: AR and verified alike at seed 12, block at seed 14).
STOPS_EARLY = {"tandem-ar": 12, "tandem-verified": 12, "tandem-block": 14}


@pytest.mark.parametrize("model", list(STOPS_EARLY))
def test_ignore_eos_writes_through_the_end_of_sequence_to_max_tokens(client, model):
    """vLLM's `ignore_eos` (fixed-length benchmarks): an answer that would stop early runs to max_tokens."""
    ask = {"model": model, "messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 60,
           "temperature": 2e-4, "seed": STOPS_EARLY[model]}
    stops = client.chat.completions.create(**ask)
    assert stops.choices[0].finish_reason == "stop" and stops.usage.completion_tokens < 60, "the case stops early without it"
    runs = client.chat.completions.create(**ask, extra_body={"ignore_eos": True})
    assert runs.choices[0].finish_reason == "length" and runs.usage.completion_tokens == 60


def test_header_forces_the_mode(client):
    raw = client.chat.completions.with_raw_response.create(model="tandem", messages=MSG, max_tokens=4, extra_headers={"x-tandem-mode": "ar"})
    assert raw.headers["x-tandem-mode"] == "ar"


def test_verified_equals_ar_through_the_api(client):
    ar = client.chat.completions.create(model="tandem-ar", messages=MSG, max_tokens=12)
    verified = client.chat.completions.create(model="tandem-verified", messages=MSG, max_tokens=12)
    assert verified.choices[0].message.content == ar.choices[0].message.content


def test_text_completion(client):
    completion = client.completions.create(model="tandem-ar", prompt="The quick brown fox", max_tokens=5)
    assert completion.object == "text_completion"
    assert 0 < completion.usage.completion_tokens <= 5
    assert completion.choices[0].finish_reason == ("length" if completion.usage.completion_tokens == 5 else "stop")


def test_streaming_chunks_arrive_before_the_end(client):
    arrivals, text = [], []
    stream = client.chat.completions.create(
        model="tandem-ar", messages=MSG, max_tokens=40, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        arrivals.append(time.perf_counter())
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
        last = chunk
    content_chunks = len(text)
    assert content_chunks > 3, "AR mode streams roughly a chunk per token"
    assert arrivals[1] < arrivals[-1] - 0.01, "chunks arrived only at the end"
    assert last.usage is not None and last.usage.completion_tokens > 0
    full = client.chat.completions.create(model="tandem-ar", messages=MSG, max_tokens=40)
    assert "".join(text) == full.choices[0].message.content


def test_sse_ends_with_done_and_carries_the_decision(base_url):
    body = {"model": "tandem-block", "messages": MSG, "max_tokens": 8, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-tandem-mode"] == "block"
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    final = json.loads(lines[-2][6:])
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert final["tandem"]["mode"] == "block"


def test_completion_stream(base_url):
    body = {"model": "tandem-ar", "prompt": "Hello", "max_tokens": 6, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body, timeout=60) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert all(json.loads(line[6:])["object"] == "text_completion" for line in lines[:-1])


def test_json_mode_asked_of_block_is_decoded_under_a_grammar_elsewhere(base_url):
    # The tiny test model is random, yet a json_object answer always parses: it is decoded under a
    # grammar, in the policy's constrained_mode since block mode cannot follow one yet.
    body = {"model": "tandem-block", "messages": MSG, "max_tokens": 30, "response_format": {"type": "json_object"}}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert (r.headers["x-tandem-mode"], r.headers["x-tandem-route-reason"], r.headers["x-tandem-structured"]) == ("ar", "constrained", "json_object")
    assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"]), dict)


INVOICE_SCHEMA = {"type": "object", "properties": {"invoice": {"type": "string"}, "total": {"type": "number"},
                                                    "status": {"enum": ["paid", "open"]}}, "required": ["invoice", "total", "status"]}


@pytest.mark.parametrize("model", ["tandem", "tandem-block"])
def test_a_json_schema_answer_is_denoised_in_its_skeleton_and_validates(base_url, model):
    # A json_schema fixes the answer's skeleton: block mode (skeleton_mode) seeds the canvas with
    # it; even the random test model's answer validates, and the decision says why. Routed, the
    # skeleton rule chooses block or constrained AR (by the agreement head and the price now) and
    # the trace says which; either answer validates.
    body = {"model": model, "messages": MSG, "max_tokens": 60,
            "response_format": {"type": "json_schema", "json_schema": {"name": "invoice", "schema": INVOICE_SCHEMA}}}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    mode = r.headers["x-tandem-mode"]
    assert r.headers["x-tandem-structured"] == "json_schema"
    if model == "tandem":
        assert r.headers["x-tandem-route-reason"] == "skeleton" and r.headers["x-tandem-route-trace"].endswith(f"skeleton:{mode}")
        assert mode in ("block", "ar")
    else:
        assert mode == "block"
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), INVOICE_SCHEMA)
    assert r.json()["tandem"]["forwards"] >= 2  # the prefill and at least one denoising step (or AR token)


@pytest.mark.parametrize("model", ["tandem", "tandem-block"])
def test_a_required_tool_call_is_denoised_in_its_skeleton(base_url, model):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city", "days"]}}},
             {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]
    body = {"model": model, "messages": MSG, "max_tokens": 80, "tools": tools, "tool_choice": "required"}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    if model == "tandem":  # the skeleton rule's choice, block or constrained AR, and the trace says which
        assert r.headers["x-tandem-route-reason"] == "skeleton"
        assert r.headers["x-tandem-route-trace"].endswith(f"skeleton:{r.headers['x-tandem-mode']}")
    else:
        assert r.headers["x-tandem-mode"] == "block"
    message = r.json()["choices"][0]["message"]
    assert r.json()["choices"][0]["finish_reason"] == "tool_calls" and message["tool_calls"]
    for call in message["tool_calls"]:
        tool = next(t["function"] for t in tools if t["function"]["name"] == call["function"]["name"])
        jsonschema.validate(json.loads(call["function"]["arguments"]), tool["parameters"])


def test_health_and_ready(base_url):
    assert httpx.get(f"{base_url}/health").json() == {"status": "ok"}
    ready = httpx.get(f"{base_url}/ready", timeout=10).json()
    assert ready["status"] == "ready" and set(ready["engines"]) == {"block", "ar"}
