"""The OpenAI wire format in: request models (pydantic) and the 400 a bad body gets. What goes out
(responses, SSE chunks) is built by `router.gateway.answers`.

Only what Tandem serves is accepted; fields OpenAI defines that do not change the output here
(`user`, `service_tier`, ...) are accepted and ignored, and unknown fields are ignored as OpenAI does.
Fields that would change the output and that Tandem does not apply (`logit_bias`, the penalties)
are taken only at values that change nothing (empty, 0), else a 400 naming them: never an answer
that silently ignores them. `n` must be 1. `ignore_eos` is vLLM's extension: the answer runs to
max_tokens through end-of-sequence tokens (fixed-length benchmarks).

Numbers and flags are typed as OpenAI types them, strictly: an integer field takes an integer only
(not "12", 12.0 or true), a number field an integer or a float, a flag true or false; anything else
is a 400 `invalid_type` naming the field (pydantic's lax mode would read "12" and true as integers).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from engines.errors import InvalidRequestError

MAX_STOP = 4  # OpenAI's limit on stop sequences


def text_field(value: str, what: str) -> str:
    """`value`, or a ValueError if it holds a lone surrogate: JSON can carry one ("\\ud800"), no
    tokenizer can encode it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} holds a lone UTF-16 surrogate, which is not text") from None
    return value


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: StrictBool = False


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: dict[str, Any] | None = None  # {"name", "schema", "strict"}

    @model_validator(mode="after")
    def _schema_given(self):
        if self.type == "json_schema" and not (self.json_schema and isinstance(self.json_schema.get("schema", {}), dict)):
            raise ValueError("response_format json_schema needs json_schema.schema (a JSON Schema object)")
        return self

    def schema_(self) -> dict | None:
        return (self.json_schema or {}).get("schema") if self.type == "json_schema" else None


# The values of a field that is not applied at which it changes nothing (every other value is a 400).
NEUTRAL: dict[str, tuple] = {
    "n": (1,), "frequency_penalty": (0,), "presence_penalty": (0,), "logit_bias": ({},), "top_k": (0, -1), "min_p": (0,),
    "repetition_penalty": (1,), "modalities": (["text"],), "audio": (), "best_of": (1,), "suffix": ("",),
}
NEUTRAL_WORDS = {
    "frequency_penalty": "0", "presence_penalty": "0", "logit_bias": "empty, every bias 0,", "top_k": "0, -1", "min_p": "0",
    "repetition_penalty": "1", "modalities": '["text"]', "audio": "none", "best_of": "1", "suffix": '""',
}


class _Sampling(BaseModel):
    """Fields shared by chat and text completions."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field("tandem", min_length=1, max_length=256)
    max_tokens: StrictInt | None = Field(None, ge=1, le=1_000_000)
    temperature: StrictFloat | None = Field(None, ge=0.0, le=2.0)  # omitted: greedy (Tandem's default, not OpenAI's 1.0)
    top_p: StrictFloat | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: StrictInt | None = Field(None, ge=-(2**63), le=2**63 - 1)
    n: StrictInt | None = Field(None, ge=1, le=128)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    ignore_eos: StrictBool = False
    frequency_penalty: StrictFloat | None = Field(None, ge=-2.0, le=2.0)  # not applied: 0 only
    presence_penalty: StrictFloat | None = Field(None, ge=-2.0, le=2.0)  # not applied: 0 only
    logit_bias: dict[str, StrictFloat] | None = None  # not applied: empty, or every bias 0
    # vLLM's sampling extensions, not applied: taken only at the value that changes nothing
    top_k: StrictInt | None = None  # 0 or -1 (vLLM: every token)
    min_p: StrictFloat | None = None  # 0
    repetition_penalty: StrictFloat | None = None  # 1
    # OpenAI's audio output, not served: text only
    modalities: list[str] | None = None  # ["text"] only
    audio: dict[str, Any] | None = None  # none

    @field_validator("stop")
    @classmethod
    def _stop(cls, v):
        stops = [v] if isinstance(v, str) else v
        if stops is not None:
            if len(stops) > MAX_STOP:
                raise ValueError(f"at most {MAX_STOP} stop sequences")
            if any(not s for s in stops):
                raise ValueError("stop sequences must be non-empty")
            for s in stops:
                text_field(s, "a stop sequence")
        return stops

    @field_validator("n", "frequency_penalty", "presence_penalty", "logit_bias", "top_k", "min_p", "repetition_penalty", "modalities", "audio")
    @classmethod
    def _only_at_its_neutral_value(cls, v, info):
        """Fields that would change the answer, served only at the value that changes nothing."""
        if v is None or v in NEUTRAL.get(info.field_name, ()):
            return v
        if info.field_name == "logit_bias" and all(bias == 0 for bias in v.values()):
            return v  # a bias of 0 changes nothing
        if info.field_name == "n":
            raise ValueError("only n=1 is supported")
        raise ValueError(f"not supported: only {NEUTRAL_WORDS[info.field_name]} or omitted")

    @model_validator(mode="after")
    def _stream_options_need_a_stream(self):
        if self.stream_options is not None and not self.stream:
            raise InvalidRequestError("stream_options is only allowed with stream: true", param="stream_options", code="invalid_value")
        return self


class FunctionCallIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(..., min_length=1, max_length=64)
    arguments: str = "{}"  # JSON text, as OpenAI sends it


class ToolCallIn(BaseModel):
    """An earlier assistant turn's tool call, in the history."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(..., min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = Field(None, max_length=256)
    tool_calls: list[ToolCallIn] | None = Field(None, max_length=128)  # assistant turns
    tool_call_id: str | None = Field(None, max_length=256)  # tool turns: the call this answers
    function_call: FunctionCallIn | None = None  # legacy assistant turns

    @field_validator("content")
    @classmethod
    def _text(cls, v):
        if isinstance(v, str):
            return text_field(v, "content")
        for part in v or []:
            if isinstance(part.get("text"), str):
                text_field(part["text"], "content")
        return v

    def text(self) -> str:
        if isinstance(self.content, list):
            parts = []
            for part in self.content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise InvalidRequestError("only text content parts are supported", param="messages", code="invalid_value")
                parts.append(part["text"])
            return "".join(parts)
        return self.content or ""


ToolChoice = Literal["none", "auto", "required"] | dict[str, Any]


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=1024)
    max_completion_tokens: StrictInt | None = Field(None, ge=1, le=1_000_000)
    response_format: ResponseFormat | None = None
    tools: list[dict[str, Any]] | None = Field(None, max_length=128)
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None
    functions: list[dict[str, Any]] | None = Field(None, max_length=128)  # legacy: tools of type function
    function_call: Literal["none", "auto"] | dict[str, Any] | None = None  # legacy tool_choice
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = Field(None, ge=0, le=20)

    @model_validator(mode="after")
    def _legacy_functions(self):
        """`functions` / `function_call` are the older names of `tools` / `tool_choice`."""
        if self.functions is not None:
            if self.tools is not None:
                raise ValueError("give tools or the legacy functions, not both")
            self.tools = [{"type": "function", "function": f} for f in self.functions]
        if self.function_call is not None:
            if self.tool_choice is not None:
                raise ValueError("give tool_choice or the legacy function_call, not both")
            fc = self.function_call
            self.tool_choice = fc if isinstance(fc, str) else {"type": "function", "function": {"name": fc.get("name")}}
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    def token_budget(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def engine_messages(self) -> list[dict]:
        """Messages as the chat template takes them: system, user, assistant (with its tool calls,
        arguments as objects) and tool turns (named after the call they answer). A tool result
        that answers no earlier call, or arguments that are not JSON, are a 400."""
        out, names = [], {}
        for i, m in enumerate(self.messages):
            turn = {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
            calls = list(m.tool_calls or [])
            if m.function_call is not None:
                calls.append(ToolCallIn(id=f"legacy-{i}", function=m.function_call))
            if calls:
                if m.role != "assistant":
                    raise InvalidRequestError(f"messages[{i}]: only assistant turns carry tool calls", param=f"messages[{i}]")
                turn["tool_calls"] = []
                for j, c in enumerate(calls):
                    try:
                        arguments = json.loads(c.function.arguments)
                    except (json.JSONDecodeError, RecursionError):
                        raise InvalidRequestError(f"messages[{i}].tool_calls[{j}].function.arguments is not JSON",
                                                  param=f"messages[{i}].tool_calls[{j}].function.arguments") from None
                    turn["tool_calls"].append({"name": c.function.name, "arguments": arguments})
                    names[c.id] = c.function.name
            if m.role == "tool":
                if m.tool_call_id not in names:
                    raise InvalidRequestError(f"messages[{i}]: tool_call_id {m.tool_call_id!r} answers no tool call of an earlier "
                                              "assistant turn", param=f"messages[{i}].tool_call_id")
                turn["name"] = names[m.tool_call_id]
            elif m.role == "function":  # legacy tool result: named by the function itself
                turn = {"role": "tool", "content": m.text(), "name": m.name or ""}
            out.append(turn)
        return out


class CompletionRequest(_Sampling):
    prompt: str | list[str] = Field(...)
    logprobs: StrictInt | None = Field(None, ge=0, le=5)  # legacy: the k most likely tokens at each position
    echo: StrictBool = False
    best_of: StrictInt | None = None  # not applied: 1 only (one answer per request)
    suffix: str | None = None  # not applied (no fill-in-the-middle): empty only

    @field_validator("best_of", "suffix")
    @classmethod
    def _not_applied(cls, v, info):
        return _Sampling._only_at_its_neutral_value.__func__(cls, v, info)

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, v):
        if isinstance(v, list):
            if len(v) != 1:
                raise ValueError("exactly one prompt per request is supported")
            v = v[0]
        return text_field(v, "prompt")

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, v):
        if v:
            raise ValueError("echo is not supported")
        return v

    def token_budget(self) -> int | None:
        return self.max_tokens


# What pydantic puts in an error's location besides the client's field names and list indices: the
# member of a union it tried (`str`, `list[str]`, `literal['none','auto']`, `function-after[...]`).
_UNION_MEMBER = re.compile(r"[\[\]()',]|^(str|int|float|bool|list|dict|none|any|bytes)$|^(function|literal|tagged|json|union|nullable)-?")


def field_path(loc) -> str:
    """The client's path to a field (`stop`, `tools.0.function`), from pydantic's location of an
    error in it (`('body', 'stop', 'str')`): the body marker and union members left out."""
    return ".".join(str(p) for p in loc if p != "body" and not (isinstance(p, str) and _UNION_MEMBER.search(p)))


def validation_error(errors: list[dict]) -> InvalidRequestError:
    """pydantic's (or FastAPI's) validation errors -> a 400 naming the first bad field. A body that
    is not a JSON object at all is `invalid_json`."""
    first = errors[0] if errors else {}
    raised = (first.get("ctx") or {}).get("error")
    if isinstance(raised, InvalidRequestError):  # a validator's own 400, with its param: as it was raised
        return raised
    loc = field_path(first.get("loc", ()))
    msg = first.get("msg", "invalid request").removeprefix("Value error, ")  # pydantic's prefix on a validator's own words
    if not loc and first.get("type") == "value_error":  # a rule across fields (a model validator)
        return InvalidRequestError(msg, code="invalid_value")
    if not loc or first.get("type") == "json_invalid":
        return InvalidRequestError(f"request body is not a valid JSON object: {msg}", code="invalid_json")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    code = "invalid_type" if str(first.get("type", "")).endswith("_type") else "invalid_value"  # OpenAI's code for a wrong type
    return InvalidRequestError(f"{loc}: {msg}{more}", code=code, param=loc)
