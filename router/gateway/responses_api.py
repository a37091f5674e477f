"""OpenAI's Responses API (`POST /v1/responses`), served by the chat completions path.

A Responses request becomes a chat completion body (router.gateway.responses_chat), the gateway
serves it as any chat request, and its typed answer (router.gateway.answer_parts) becomes a
`response` object (`to_response`, `router.gateway.responses_answers`); streaming is
`router.gateway.responses_events`. Only what chat completions can serve is
accepted: function tools, text input, text / JSON output. Other tool types, content parts or input
items are a 400 naming them; `reasoning` items in the input are dropped (Tandem writes none, and
they carry no text the model could read). Fields that change nothing here (`reasoning`, `include`,
`user`, `truncation`) are accepted and ignored.

`previous_response_id` replays the stored input and output items of an earlier response
(`router.gateway.responses_store`); `instructions` are not carried over, as OpenAI does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictFloat, StrictInt, Tag, TypeAdapter,
                      field_validator, model_validator)

from router.gateway.openai_api import text_field

TEXT_PARTS = ("input_text", "output_text")  # content parts whose `text` the model reads
ITEM_TYPES = ("message", "function_call", "function_call_output")
DROPPED_ITEMS = ("reasoning",)


# ---- the request ---------------------------------------------------------------------------------------


def _parts_text(parts: list[dict], what: str) -> str:
    """Text content parts joined; any other part is a ValueError naming its type."""
    texts = []
    for part in parts:
        if part.get("type") not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise ValueError(f"{what}: content part type {part.get('type')!r} is not supported (only {', '.join(TEXT_PARTS)})")
        texts.append(text_field(part["text"], what))
    return "".join(texts)


def _content_text(content: str | list[dict], what: str) -> str:
    """A content field's text: the string itself, or its text parts joined (checked as `text_field` checks text)."""
    return text_field(content, what) if isinstance(content, str) else _parts_text(content, what)


def _readable(what: str) -> AfterValidator:
    """Checks that a content field (named `what` in errors) has text as `_content_text` reads it."""

    def check(v):
        _content_text(v, what)
        return v

    return AfterValidator(check)


MessageContent = Annotated[str | list[dict[str, Any]], _readable("content")]  # a string or content parts
OutputContent = Annotated[str | list[dict[str, Any]], _readable("output")]


class InputMessage(BaseModel):
    """A message item (`type` may be omitted, as the Agents SDK does for user input)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: MessageContent

    def text(self) -> str:
        return _content_text(self.content, "content")


class FunctionCallItem(BaseModel):
    """An earlier answer's call (`id` and `status`, if sent, are ignored)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function_call"]
    call_id: str = Field(..., min_length=1, max_length=256)
    name: str = Field(..., min_length=1, max_length=64)
    arguments: str = "{}"  # JSON text

    @field_validator("arguments")
    @classmethod
    def _text(cls, v):
        return text_field(v, "function_call arguments")


class FunctionCallOutputItem(BaseModel):
    """A tool's result, answering `call_id`."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function_call_output"]
    call_id: str = Field(..., min_length=1, max_length=256)
    output: OutputContent

    def text(self) -> str:
        return _content_text(self.output, "output")


def _item_kind(v: Any) -> str:
    return (v.get("type") or "message") if isinstance(v, dict) else getattr(v, "type", "message")


InputItem = Annotated[
    Union[Annotated[InputMessage, Tag("message")], Annotated[FunctionCallItem, Tag("function_call")],
          Annotated[FunctionCallOutputItem, Tag("function_call_output")]],
    Discriminator(_item_kind),
]
INPUT_ITEMS = TypeAdapter(list[InputItem])
# A string or items; tagged, so that a bad item is reported as itself, not also as "not a string".
Input = Annotated[Union[Annotated[str, Tag("text")], Annotated[list[InputItem], Tag("items")]],
                  Discriminator(lambda v: "text" if isinstance(v, str) else "items")]


def known_items(items: list) -> list:
    """Drop reasoning items; name any item type chat completions cannot carry."""
    unknown = sorted({str(_item_kind(i)) for i in items} - set(ITEM_TYPES) - set(DROPPED_ITEMS))
    if unknown:
        raise ValueError(f"input item types {', '.join(unknown)} are not supported (only {', '.join(ITEM_TYPES)})")
    return [i for i in items if _item_kind(i) not in DROPPED_ITEMS]


class FunctionTool(BaseModel):
    """A Responses function tool: flat, not nested under `function` as in chat."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["function"] = "function"
    name: str = Field(..., min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None

    def chat(self) -> dict:
        return {"type": "function", "function": self.model_dump(exclude={"type"}, exclude_none=True)}


class NamedToolChoice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["function"]
    name: str = Field(..., min_length=1, max_length=64)


class TextFormat(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str = Field("response", min_length=1, max_length=64)  # json_schema only
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: StrictBool | None = None

    @model_validator(mode="after")
    def _schema_given(self):
        if self.type == "json_schema" and self.schema_ is None:
            raise ValueError("text.format json_schema needs schema (a JSON Schema object)")
        return self

    def echo(self) -> dict:
        """As the response object repeats it."""
        if self.type != "json_schema":
            return {"type": self.type}
        return self.model_dump(by_alias=True, exclude_none=True)

    def chat(self) -> dict | None:
        """As chat's `response_format`."""
        if self.type == "text":
            return None
        if self.type == "json_object":
            return {"type": "json_object"}
        spec = self.model_dump(by_alias=True, exclude={"type"}, exclude_none=True)
        return {"type": "json_schema", "json_schema": spec}


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: TextFormat = Field(default_factory=TextFormat)


class ResponsesRequest(BaseModel):
    """`POST /v1/responses`, as far as chat completions can serve it."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field("tandem", min_length=1, max_length=256)
    input: Input = Field(...)
    instructions: str | None = None  # a leading system message; not carried to the next response
    tools: list[FunctionTool] | None = Field(None, max_length=128)
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None
    text: TextConfig | None = None
    max_output_tokens: StrictInt | None = Field(None, ge=1, le=1_000_000)  # strict types, as in chat (router.gateway.openai_api)
    temperature: StrictFloat | None = Field(None, ge=0.0, le=2.0)  # omitted: greedy, as in chat
    top_p: StrictFloat | None = Field(None, gt=0.0, le=1.0)
    stream: StrictBool = False
    previous_response_id: str | None = Field(None, min_length=1, max_length=256)
    store: StrictBool | None = None  # omitted: stored (OpenAI's default), when a store is configured
    metadata: dict[str, str] | None = None
    reasoning: dict[str, Any] | None = None  # ignored: no reasoning model
    truncation: Literal["auto", "disabled"] | None = None  # ignored: a prompt over the context is a 400
    user: str | None = None  # ignored
    background: StrictBool | None = None  # not served: false only (every response is answered while the client waits)
    include: list[str] | None = None  # extra output OpenAI can add; none is served: empty only

    @field_validator("background")
    @classmethod
    def _no_background(cls, v):
        if v:
            raise ValueError("background responses are not supported: omit it or give false")
        return v

    @field_validator("include")
    @classmethod
    def _nothing_included(cls, v):
        if v:
            raise ValueError(f"include {', '.join(map(repr, v))} is not supported: nothing extra can be included")
        return v

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, v):
        return known_items(v) if isinstance(v, list) else v

    @field_validator("input", "instructions")
    @classmethod
    def _text(cls, v, info):
        return text_field(v, info.field_name) if isinstance(v, str) else v

    @field_validator("tools", mode="before")
    @classmethod
    def _function_tools(cls, v):
        others = sorted({str(t.get("type")) for t in v or [] if isinstance(t, dict) and t.get("type", "function") != "function"})
        if others:
            raise ValueError(f"tool types {', '.join(others)} are not supported (only function tools)")
        return v

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _named_function(cls, v):
        if isinstance(v, dict) and v.get("type") != "function":
            raise ValueError(f"tool_choice type {v.get('type')!r} is not supported: give 'auto', 'none', 'required' "
                             "or {'type': 'function', 'name': ...}")
        return v

    def input_items(self) -> list[dict]:
        """The input as items, as they are stored for a later previous_response_id."""
        if isinstance(self.input, str):
            return [{"type": "message", "role": "user", "content": self.input}]
        return [item.model_dump(exclude_none=True) for item in self.input]
