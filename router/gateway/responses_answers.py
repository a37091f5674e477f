"""The Responses API's wire format out: a typed answer (router.gateway.answer_parts) as a `response`
object (`to_response`), and the output items and response object that
`router.gateway.responses_events` streams (`router.gateway.responses_api` is the wire format in)."""

from __future__ import annotations

import time
import uuid

from router.gateway.answer_parts import Answer
from router.gateway.responses_api import NamedToolChoice, ResponsesRequest, TextFormat


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


def new_item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def message_item(item_id: str, text: str, status: str = "completed") -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def function_call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments, "status": status}


def response_usage(answer: Answer | None) -> dict | None:
    if answer is None:
        return None
    i, o = answer.prompt_tokens, answer.output_tokens
    return {"input_tokens": i, "output_tokens": o, "total_tokens": i + o,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}


def response_object(req: ResponsesRequest, response_id: str, created_at: int, model: str, output: list[dict], status: str,
                    usage: dict | None = None, tandem: dict | None = None, error: dict | None = None) -> dict:
    """The `response` object; `status` is in_progress, completed, incomplete (the token budget ran
    out) or failed (with `error`: {code, message})."""
    return {
        "id": response_id, "object": "response", "created_at": created_at, "status": status, "model": model,
        "error": error, "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "output": output, "usage": usage, "instructions": req.instructions,
        "tools": [t.model_dump(exclude_none=True) for t in req.tools or []],
        "tool_choice": req.tool_choice.model_dump() if isinstance(req.tool_choice, NamedToolChoice) else req.tool_choice or "auto",
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "text": {"format": (req.text.format if req.text else TextFormat()).echo()},
        "temperature": req.temperature, "top_p": req.top_p, "max_output_tokens": req.max_output_tokens,
        "previous_response_id": req.previous_response_id, "metadata": req.metadata or {},
        "truncation": req.truncation or "disabled", "user": req.user,
        "store": req.store is not False,  # what was asked; the gateway says False once a save did not happen (router.gateway.ingress)
    } | ({"tandem": tandem} if tandem is not None else {})


def to_response(answer: Answer, req: ResponsesRequest, response_id: str) -> dict:
    """A whole answer -> the response object: a message item for content, a function_call item per
    tool call (call_id: the call's id, as chat gives it); finish_reason length -> incomplete."""
    status = "incomplete" if answer.finish_reason == "length" else "completed"
    output = []
    if answer.content or not answer.calls:
        output.append(message_item(new_item_id("msg"), answer.content or ""))
    for c in answer.calls:
        output.append(function_call_item(new_item_id("fc"), c.id, c.name, c.arguments))
    if status == "incomplete":
        output[-1]["status"] = "incomplete"
    return response_object(req, response_id, int(time.time()), req.model, output, status, response_usage(answer), answer.tandem)
