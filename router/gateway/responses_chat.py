"""A Responses request served as a chat completion (router.gateway.responses_api defines the request): its
items and settings as a chat body (`to_chat_body`, `chat_request`), and an error found on the chat path named
in the Responses request's own fields (`responses_error`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from engines.errors import InvalidRequestError, TandemError
from router.gateway.openai_api import ChatCompletionRequest, validation_error
from router.gateway.responses_api import INPUT_ITEMS, FunctionCallItem, InputMessage, NamedToolChoice, ResponsesRequest, known_items


# ---- request -> chat completion body -------------------------------------------------------------------


def _chat_messages(items: list) -> list[dict]:
    """Items -> chat messages. A function_call joins the assistant turn just before it (calls
    that follow each other, or an answer's text and its calls, are one turn)."""
    messages: list[dict] = []
    for item in items:
        if isinstance(item, InputMessage):
            messages.append({"role": item.role, "content": item.text()})
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
            if not messages or messages[-1]["role"] != "assistant":
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.text()})
    return messages


def _chat_tool_choice(choice) -> str | dict | None:
    return {"type": "function", "function": {"name": choice.name}} if isinstance(choice, NamedToolChoice) else choice


def to_chat_body(req: ResponsesRequest, history_items: list | None = None) -> dict:
    """A chat completion body (validates as ChatCompletionRequest): instructions, then the stored
    history, then this request's input."""
    history = INPUT_ITEMS.validate_python(known_items(history_items)) if history_items else []
    items = [InputMessage(role="user", content=req.input)] if isinstance(req.input, str) else list(req.input)
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    messages = system + _chat_messages(history + items)
    if not messages:
        raise InvalidRequestError("input holds no message", param="input", code="invalid_value")
    body: dict[str, Any] = {"model": req.model, "messages": messages, "stream": req.stream}
    optional = {
        "tools": [t.chat() for t in req.tools] if req.tools else None,
        "tool_choice": _chat_tool_choice(req.tool_choice),
        "parallel_tool_calls": req.parallel_tool_calls,
        "response_format": req.text.format.chat() if req.text else None,
        "max_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
    }
    return body | {k: v for k, v in optional.items() if v is not None}


# Chat's names for what a Responses request calls otherwise, longest first: an error found on the
# chat path (validation, the schema checks, the engine's budget) names the client's own field.
_RESPONSES_NAMES = (
    ("response_format.json_schema.schema", "text.format.schema"),
    ("the response_format schema", "the text.format schema"),
    ("response_format", "text.format"),
    ("max_completion_tokens", "max_output_tokens"),
    ("max_tokens", "max_output_tokens"),
)
_CHAT_TOOL = re.compile(r"tools(\[\d+\]|\.\d+)\.function\.")
_CHAT_MESSAGE = re.compile(r"^messages(\.\d+|\[\d+\])?")


def responses_error(exc: TandemError, req: ResponsesRequest) -> TandemError:
    """`exc`, raised while serving `req` on the chat path, naming the Responses fields (`max_output_tokens`,
    `text.format`, `instructions`, `input`, `tools[0].parameters`) instead of chat's."""

    def rename(text: str, param: bool) -> str:
        for chat, responses in _RESPONSES_NAMES:
            text = text.replace(chat, responses)
        text = _CHAT_TOOL.sub(lambda m: f"tools{m.group(1)}.", text)
        if param:
            first = _CHAT_MESSAGE.match(text)
            if first is not None and req.instructions and first.group(1) in (".0", "[0]"):
                text = "instructions"  # the system turn instructions became
            elif first is not None:
                text = "input"  # chat's messages are the input items (and any history) renumbered
        return text

    exc.message = rename(exc.message, False)
    if exc.param:
        old = exc.param
        exc.param = rename(old, True)
        if exc.message.startswith(f"{old}:"):
            exc.message = exc.param + exc.message[len(old):]
    return exc


def chat_request(req: ResponsesRequest, history_items: list | None = None) -> ChatCompletionRequest:
    """`to_chat_body` validated; a body chat completions refuse is a 400 naming the Responses field."""
    try:
        return ChatCompletionRequest.model_validate(to_chat_body(req, history_items))
    except ValidationError as exc:
        raise responses_error(validation_error(list(exc.errors())), req) from None
