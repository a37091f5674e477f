"""What the structured-output tests through HTTP share (tests/app/test_structured_limits.py,
tests/app/test_stop_and_grammar.py): the modes' model aliases, a tool and a schema, and `answer`, which
posts a request (streamed or not) and reads back what it answered."""

from __future__ import annotations

import json

import httpx

MODES = ["tandem-block", "tandem-verified", "tandem-ar"]
ASK = [{"role": "user", "content": "Find me a flight from SFO to JFK for 2 people."}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FOUR_FIELDS = {"type": "object", "properties": {k: {"type": "string"} for k in ("origin", "destination", "date", "airline")},
               "required": ["origin", "destination", "date", "airline"]}


def json_schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def answer(base_url: str, body: dict, headers: dict | None = None) -> tuple[httpx.Response, dict | None]:
    """(response, what it answered: {"content", "tool_calls", "finish_reason", "tandem"}); a stream is
    read whole and joined as OpenAI's clients join it. None when it is not a 200."""
    body = {"messages": ASK, "temperature": 1.0, "seed": 7} | body
    if not body.get("stream"):
        r = httpx.post(f"{base_url}/v1/chat/completions", json=body, headers=headers, timeout=120)
        if r.status_code != 200:
            return r, None
        choice = r.json()["choices"][0]
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in choice["message"].get("tool_calls") or []]
        return r, {"content": choice["message"]["content"], "tool_calls": calls, "finish_reason": choice["finish_reason"],
                   "tandem": r.json()["tandem"]}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, headers=headers, timeout=120) as r:
        if r.status_code != 200:
            r.read()
            return r, None
        content, calls, finish, tandem = "", {}, None, None
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            assert "error" not in chunk, chunk  # nothing is refused once a stream has started
            for choice in chunk.get("choices", []):
                content += choice["delta"].get("content") or ""
                for d in choice["delta"].get("tool_calls") or []:
                    call = calls.setdefault(d["index"], {"name": "", "arguments": ""})
                    call["name"] += d.get("function", {}).get("name") or ""
                    call["arguments"] += d.get("function", {}).get("arguments") or ""
                finish = choice.get("finish_reason") or finish
            tandem = chunk.get("tandem") or tandem
    return r, {"content": content if not calls else None, "tool_calls": [calls[i] for i in sorted(calls)], "finish_reason": finish,
               "tandem": tandem}
