"""What a decisions-log entry keeps of a request (`router.gateway.decisions_log` writes it):
`request_features` (what routing read, text included: the input, never stored as is),
`stored_features` (the `features` field: numbers and sizes, no text) and `cut_text` (the opt-in
`text` field, cut to a byte budget in the order the decisions log's docstring gives)."""

from __future__ import annotations

import json

RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")
MIN_LIMIT_CHARS = 64  # the shortest head + tail a message is cut to before text is dropped whole


def request_features(request) -> dict:
    """What routing read of a RouteRequest (or a dict with the same keys), prompt text included:
    the input `log_decision` reduces to stored features (and, opt-in, cut text). Never stored as is."""
    d = request if isinstance(request, dict) else request.model_dump()
    return {
        "messages": d["messages"],
        "model": d.get("model", "tandem"),
        "max_tokens": d.get("max_tokens"),
        "response_format": d.get("response_format"),
        "tools": d.get("tools"),
        "stop": [d["stop"]] if isinstance(d.get("stop"), str) else d.get("stop"),
    }


def compact_json(x) -> str:
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def utf8_bytes(s: str) -> int:
    return len(s.encode("utf-8"))  # as redis-py sends it (a lone surrogate raises: the entry is dropped and counted)


def stored_features(request: dict) -> dict:
    """The `features` field: the numeric feature vector and sizes; no text."""
    from router.decision.features import FEATURE_VERSION, NUMERIC_FEATURES, content_text, extract_features

    messages, tools, rf = request["messages"], request.get("tools"), request.get("response_format")
    f = extract_features(messages, request.get("max_tokens"), rf, tools, request.get("stop"))
    rf_type = rf.get("type", "text") if isinstance(rf, dict) else None
    return {
        "feature_version": FEATURE_VERSION,
        "numeric": {name: round(v, 4) for name, v in zip(NUMERIC_FEATURES, f.numeric)},
        "prompt_tokens": f.prompt_tokens,
        "prompt_chars": sum(len(content_text(m.get("content"))) for m in messages),
        "messages": len(messages),
        "tools": len(tools or ()),
        "tools_bytes": utf8_bytes(compact_json(tools)) if tools else 0,
        "response_format": (rf_type if rf_type in RESPONSE_FORMAT_TYPES else "other") if rf_type else None,
        "schema_bytes": utf8_bytes(compact_json(rf.get("json_schema"))) if isinstance(rf, dict) and rf.get("json_schema") else 0,
        "stop": len(request.get("stop") or ()),
        "max_tokens": request.get("max_tokens"),
        "model": str(request.get("model", "tandem"))[:64],
    }


def _head_tail(s: str, limit: int) -> str:
    if len(s) <= limit:
        return s
    head = (limit * 2) // 3
    return f"{s[:head]} ... {s[len(s) - (limit - head):]}"


def _tool_name(tool) -> str:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return str(fn.get("name", "") if isinstance(fn, dict) else "")[:64]


def cut_text(request: dict, budget: int) -> tuple[dict, bool]:
    """The `text` field for `request` in at most `budget` bytes of JSON, and whether anything was
    cut (the cuts are listed under `cut`; see the module docstring for their order)."""
    from router.decision.features import content_text

    messages = [{"role": str(m.get("role")), "content": content_text(m.get("content"))} for m in request["messages"]]
    text = {"messages": messages} | {k: request[k] for k in ("tools", "response_format", "stop") if request.get(k) is not None}
    cut: dict = {}

    def fits() -> bool:
        return utf8_bytes(compact_json(text | ({"cut": cut} if cut else {}))) <= budget

    if fits():
        return text, False
    if text.get("tools"):
        cut["tools"] = {"bytes": utf8_bytes(compact_json(text["tools"])), "kept": "names"}
        text["tools"] = [{"type": "function", "function": {"name": _tool_name(t)}} for t in text["tools"]]
    rf = text.get("response_format")
    if isinstance(rf, dict) and set(rf) - {"type"} and not fits():
        cut["response_format"] = {"bytes": utf8_bytes(compact_json(rf)), "kept": "type"}
        text["response_format"] = {"type": rf.get("type", "text")}
    originals = [m["content"] for m in messages]
    stops = list(text.get("stop") or ())
    limit = max([len(s) for s in originals] + [len(s) for s in stops] + [MIN_LIMIT_CHARS])
    while not fits() and limit > MIN_LIMIT_CHARS:
        limit = max(MIN_LIMIT_CHARS, limit // 2)
        for m, s in zip(messages, originals):
            m["content"] = _head_tail(s, limit)
        if stops:
            text["stop"] = [_head_tail(s, limit) for s in stops]
        kept = sum(len(m["content"]) for m in messages)
        cut["messages"] = {"limit_chars": limit, "chars_cut": max(0, sum(map(len, originals)) - kept)}
    if not fits():  # too many messages (or tools) even at MIN_LIMIT_CHARS each
        whole = {"messages": originals} | {k: request.get(k) for k in ("tools", "response_format", "stop")}
        return {"cut": {"all": {"bytes": utf8_bytes(compact_json(whole))}}}, True
    return text | {"cut": cut}, True
