"""What an answer must look like: the output grammar of a chat request, built from its tools,
tool_choice and response_format, and checked before any decoding.

`output_spec(request)` validates every tool definition (name, parameters schema: local refs only,
bounded, each keyword one the grammar implements) and the response_format schema the same way,
then writes one llguidance Lark grammar for the engine:

- tool_choice `required` (or a named function): one or more calls (one without
  parallel_tool_calls), each exactly `<tool_call>{"name": "NAME", "arguments": ARGS}</tool_call>`
  with ARGS under the tool's parameters schema (the chat template writes history the same way);
- `auto`: those calls, or a free answer, not empty, that does not start with `<` (or a JSON answer
  when response_format asks for one);
- `none` or no tools: the response_format grammar, if any.

Every problem is a 400 naming the field (`tools[1].function.parameters`) and the feature.
Runs in the schema pool (`router.gateway.schemas.check_off_loop`): compiling is CPU work.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from engines.grammar_check import grammar_problems
from engines.errors import InvalidRequestError
from router.gateway.errors import PayloadTooLargeError
from engines.skeleton import JSON_STYLE, Template, closed_objects, template_for_schema, template_for_tool_choice
from router.gateway.schemas import SchemaCheck, compile_schema

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
MAX_TOOLS = 128  # OpenAI's limit
MAX_TOOLS_BYTES = 256 * 1024  # all tool definitions as compact JSON: every turn of an agent sends them, and the prompt holds them
MAX_PARALLEL_CALLS = 8  # calls in one answer: bounds a model that never stops calling
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"

Structured = Literal["tools", "json_schema", "json_object"]


@dataclass(frozen=True)
class Tool:
    """One function the model may call, as the chat template and the parser need it."""

    name: str
    description: str
    parameters: dict  # a JSON Schema object
    check: SchemaCheck  # validates arguments
    grammar_schema: dict  # `parameters` with the grammar's JSON style

    def template(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class OutputSpec:
    """A chat request's output: the grammar the engine decodes under and how to read the answer."""

    tools: list[Tool] = field(default_factory=list)  # declared to the model (in the prompt)
    callable: list[str] = field(default_factory=list)  # names the answer may call (empty: no calls)
    calls_required: bool = False  # the answer is calls only (required / named tool_choice)
    grammar: str | None = None  # llguidance grammar; None: free text
    structured: Structured | None = None  # what the grammar is, for routing and headers
    content_check: SchemaCheck | None = None  # response_format, for a content answer
    # The answer's fixed skeleton (engines.skeleton), when its shape is known in advance: a
    # json_schema, or a tool call that must be made. Block mode denoises only its slots.
    skeleton: Template | None = None
    skeleton_optional: bool = False  # tool_choice auto: the skeleton only if the model begins a call (else a text answer)
    schema: dict | None = None  # the json_schema the model is told about (engines.skeleton.schema_instruction)
    # The grammar also allows a free-text answer (tool_choice auto without a JSON response_format):
    # the client's stop strings apply to that text only, never inside a call or JSON (docs/serving.md).
    free_text: bool = False

    @property
    def constrained_opener(self) -> str | None:
        """What opens the constrained span when the answer may also be free text (the engine applies
        stop strings only to an answer that does not begin with it); None: all of it is constrained."""
        return CALL_OPEN if self.free_text else None

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def content_check_for(self, text: str, finish_reason: str) -> SchemaCheck | None:
        """The check a finished answer must pass before it is sent: response_format's, for a content
        answer that stopped by itself (a cut answer or a tool call is not checked against it)."""
        if self.content_check is None or finish_reason != "stop" or self.callable and text.startswith(CALL_OPEN):
            return None
        return self.content_check


def _bad(message: str, param: str, code: str = "invalid_value") -> InvalidRequestError:
    return InvalidRequestError(message, param=param, code=code)


def _grammar_ready(schema: dict, param: str) -> dict:
    """`schema` with the JSON style the grammar writes; a 400 naming any keyword it cannot follow."""
    styled = closed_objects(schema) | {"x-guidance": JSON_STYLE}
    problems = grammar_problems(json.dumps({"grammars": [{"json_schema": styled}]}))
    if problems:
        raise _bad(f"{param}: {'; '.join(problems)} (not supported for constrained decoding)", param, "unsupported_schema")
    return styled


def _checked_schema(schema: Any, param: str) -> SchemaCheck:
    try:
        return compile_schema(schema)
    except InvalidRequestError as exc:
        raise _bad(f"{param}: {exc.message}", param, exc.code) from None


def parse_tools(tools: list[dict] | None) -> list[Tool]:
    """OpenAI `tools` -> Tools, each checked; a bad one is a 400 naming it."""
    if not tools:
        return []
    if len(tools) > MAX_TOOLS:
        raise _bad(f"at most {MAX_TOOLS} tools", "tools")
    try:
        size = len(json.dumps(tools, separators=(",", ":"), default=str))
    except (RecursionError, ValueError):
        raise _bad("tools is nested too deeply", "tools") from None
    if size > MAX_TOOLS_BYTES:
        raise PayloadTooLargeError(f"tools is {size} bytes as JSON; at most {MAX_TOOLS_BYTES}", param="tools", code="tools_too_large")
    out, seen = [], set()
    for i, spec in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(spec, dict) or spec.get("type", "function") != "function" or not isinstance(spec.get("function"), dict):
            raise _bad(f"{where}: only {{'type': 'function', 'function': {{...}}}} tools are supported", where)
        fn = spec["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise _bad(f"{where}.function.name must be 1-64 letters, digits, '_' or '-', got {name!r}", f"{where}.function.name")
        if name in seen:
            raise _bad(f"{where}: two tools are named {name!r}", f"{where}.function.name")
        seen.add(name)
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise _bad(f"{where}.function.description must be a string", f"{where}.function.description")
        params = fn.get("parameters")
        params = {"type": "object", "properties": {}} if params is None else params
        where_params = f"{where}.function.parameters"
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise _bad(f"{where_params} must be a JSON Schema of type object", where_params, "invalid_schema")
        check = _checked_schema(params, where_params)
        out.append(Tool(name, description, params, check, _grammar_ready(params, where_params)))
    return out


def _call_rule(tool: Tool) -> str:
    head = json.dumps(f'{CALL_OPEN}{{"name": "{tool.name}", "arguments": ')  # a Lark string literal
    tail = json.dumps(f"}}{CALL_CLOSE}")
    return f"{head} %json {json.dumps(tool.grammar_schema)} {tail}"


def _lark(calls: list[Tool], parallel: bool, required: bool, content: dict | None) -> str:
    """The Lark grammar: calls to `calls`, then (unless `required`) the alternative answer:
    free text not starting with '<', or JSON under `content` when a response_format asks for it."""
    rules = [f"call: {' | '.join(f'call_{i}' for i in range(len(calls)))}"]
    rules += [f"call_{i}: {_call_rule(t)}" for i, t in enumerate(calls)]
    calls_rule = f"call{{1,{MAX_PARALLEL_CALLS}}}" if parallel else "call"
    if required:
        start = f"start: {calls_rule}"
    elif content is not None:
        start = f"start: {calls_rule} | %json {json.dumps(content)}"
    else:
        start = f"start: {calls_rule} | TEXT\nTEXT: /[^<](.|\\n)*/"  # never empty: a tools request is answered, not silently
    return "\n".join([start, *rules])


def output_spec(req) -> OutputSpec:
    """The output of a `ChatCompletionRequest` (tools, tool_choice, parallel_tool_calls,
    response_format). Raises InvalidRequestError (400) for anything that cannot be honoured."""
    tools = parse_tools(req.tools)
    choice = req.tool_choice if req.tool_choice is not None else ("auto" if tools else "none")
    function = choice.get("function") if isinstance(choice, dict) else None
    named = function.get("name") if isinstance(function, dict) else None
    if isinstance(choice, dict) and (choice.get("type", "function") != "function" or not isinstance(named, str)):
        raise _bad("tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}", "tool_choice")
    if (choice == "required" or named) and not tools:
        raise _bad(f"tool_choice {choice!r} needs tools, and none were given", "tool_choice")
    if named and named not in {t.name for t in tools}:
        raise _bad(f"tool_choice names {named!r}, which is not among the tools ({', '.join(t.name for t in tools)})", "tool_choice")

    fmt = req.response_format
    content_check, content_schema, structured, schema = None, None, None, None
    if fmt is not None and fmt.type != "text":
        param = "response_format.json_schema.schema"
        schema = fmt.schema_() if fmt.type == "json_schema" else None
        content_check = compile_schema(schema)
        content_schema = _grammar_ready(schema if schema is not None else {"type": "object"}, param)
        structured = fmt.type

    parallel = req.parallel_tool_calls is not False
    if choice == "none" or not tools:
        grammar = None
        if content_schema is not None:
            grammar = json.dumps({"grammars": [{"json_schema": content_schema}]})
        skeleton = template_for_schema(schema) if schema is not None else None
        return OutputSpec(tools, [], False, grammar, structured, content_check, skeleton=skeleton, schema=schema)
    callable_ = [t for t in tools if named is None or t.name == named]
    required = choice == "required" or named is not None
    grammar = json.dumps({"grammars": [{"lark_grammar": _lark(callable_, parallel and not named, required, content_schema)}]})
    problems = grammar_problems(grammar)
    if problems:  # a bug here, not the client's: say so plainly
        raise _bad(f"the tools cannot be turned into an output grammar: {'; '.join(problems)}", "tools", "unsupported_schema")
    # A call's skeleton; under `auto` only if the model begins a call (a JSON content answer has a shape of its own: none)
    skeleton = template_for_tool_choice([(t.name, t.parameters) for t in callable_]) if required or content_schema is None else None
    return OutputSpec(tools, [t.name for t in callable_], required, grammar, "tools", content_check, skeleton,
                      skeleton_optional=skeleton is not None and not required, free_text=not required and content_schema is None)
