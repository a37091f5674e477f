"""Request features for the router: three text fields and a short numeric vector.

One function, `extract_features`, serves training, evaluation and live routing, so the model
always sees the same inputs. Text is cut to a head and a tail before vectorizing: the instruction
is nearly always at the start or the end of a message, and bounded text keeps vectorizing fast
(decide() has a sub-millisecond budget).

- `user`    last user message (first 800 + last 300 chars)        -> word 1-2 grams
- `chars`   last user message (first 250 + last 80 chars)         -> char 2-4 grams (typo-robust)
- `context` system prompt + earlier user turns (heads)            -> word 1-2 grams; carries the
            instruction when the last message is only the payload ("You label reviews..." + review)
- `numeric` NUMERIC_FEATURES below (prompt size, max_tokens, response format, tools, turns, ...)

Token counts are approximate (characters / 4); no model tokenizer is needed.
Bump FEATURE_VERSION whenever any of this changes: a model trained on other features refuses to load.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

FEATURE_VERSION = 2  # 2: the length model also reads a text-length estimate

NUMERIC_FEATURES: tuple[str, ...] = (
    "log_prompt_tokens",  # all messages
    "log_user_tokens",  # last user message
    "log_max_tokens",  # 0 when unset
    "has_max_tokens",
    "json_mode",  # response_format json_object or json_schema
    "json_schema",  # a JSON schema is given
    "has_tools",
    "log_n_tools",
    "log_user_turns",
    "has_system",
    "n_stop",  # number of stop sequences, at most 4
    "log_n_numbers",  # numbers in the last user message
    "log_n_lines",  # lines in the last user message
    "has_code",  # a code fence or code-like line in the last user message
)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_CODE = re.compile(r"```|^\s*(?:def |class |for |if |return |import |SELECT |const |function )", re.M)


def approx_tokens(text: str) -> int:
    """Rough token count: characters / 4 (at least 1 for non-empty text)."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class PromptSize:
    """A request's prompt, roughly: what the cost model prices its prefill by."""

    tokens: int  # all messages and the tool declarations
    head_tokens: int  # all but the last message: what an agent's next turn sends again (the prefix cache's key)


def prompt_size(messages: list[dict], tools: list | None = None) -> PromptSize:
    """`approx_tokens` of the messages' text (and the tools' JSON, rendered in the system turn)."""
    tool_tokens = approx_tokens(json.dumps(tools)) if tools else 0
    sizes = [approx_tokens(content_text(m.get("content"))) for m in messages]
    return PromptSize(tokens=sum(sizes) + tool_tokens, head_tokens=sum(sizes[:-1]) + tool_tokens if len(sizes) > 1 else 0)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or OpenAI content parts ({'type': 'text', 'text': ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return str(content)


def _cut(text: str, head: int, tail: int) -> str:
    return text if len(text) <= head + tail else f"{text[:head]} ... {text[-tail:]}"


@dataclass(slots=True)
class RequestFeatures:
    user: str  # text for the word n-grams
    chars: str  # text for the char n-grams
    context: str  # system prompt and earlier user turns
    numeric: list[float]  # in NUMERIC_FEATURES order
    prompt_tokens: int  # approximate, all messages


def extract_features(
    messages: list[dict],
    max_tokens: int | None = None,
    response_format: dict | None = None,
    tools: list | None = None,
    stop: list[str] | str | None = None,
) -> RequestFeatures:
    system_parts: list[str] = []
    users: list[str] = []
    total_chars = 0
    for m in messages:
        text = content_text(m.get("content"))
        total_chars += len(text)
        role = m.get("role")
        if role in ("system", "developer"):
            system_parts.append(text)
        elif role == "user":
            users.append(text)
    last = users[-1] if users else ""
    earlier = users[-3:-1]
    context = " ".join([_cut(" ".join(system_parts), 300, 0)] + [_cut(u, 200, 0) for u in earlier]).strip()
    rf_type = (response_format or {}).get("type", "text") if isinstance(response_format, dict) else "text"
    if isinstance(stop, str):
        stop = [stop]
    user_tokens = approx_tokens(last)
    numeric = [
        math.log1p((total_chars + 3) // 4),
        math.log1p(user_tokens),
        math.log1p(max_tokens or 0),
        1.0 if max_tokens else 0.0,
        1.0 if rf_type in ("json_object", "json_schema") else 0.0,
        1.0 if rf_type == "json_schema" else 0.0,
        1.0 if tools else 0.0,
        math.log1p(len(tools or ())),
        math.log1p(len(users)),
        1.0 if system_parts else 0.0,
        float(min(4, len(stop or ()))),
        math.log1p(len(_NUMBER.findall(last))),
        math.log1p(last.count("\n") + 1 if last else 0),
        1.0 if _CODE.search(last) else 0.0,
    ]
    return RequestFeatures(
        user=_cut(last, 800, 300),
        chars=_cut(last, 250, 80),
        context=context,
        numeric=numeric,
        prompt_tokens=(total_chars + 3) // 4,
    )


def features_of(record: dict) -> RequestFeatures:
    """Features of a request given as a dict (a data set line, a logged decision, a RouteRequest dump)."""
    return extract_features(
        record["messages"], record.get("max_tokens"), record.get("response_format"), record.get("tools"), record.get("stop")
    )
