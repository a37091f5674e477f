"""Factories for the Responses API tests (tests/router/test_responses_*.py): what the Agents SDK
sends, and what the gateway's replies hand the route: typed answers and stream parts
(router.gateway.answer_parts) read by `router.gateway.tool_calls`, so only the model is scripted."""

from __future__ import annotations

from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from router.gateway.answer_parts import Answer, Finished
from router.gateway.responses_answers import new_response_id
from router.gateway.responses_api import ResponsesRequest
from router.gateway.responses_events import ResponseEvents
from router.gateway.tool_calls import CallReader, read_answer

EVENT = TypeAdapter(ResponseStreamEvent)
TANDEM = {"mode": "block", "routed_mode": "block", "policy_version": 3}
WEATHER_PARAMS = {  # as the Agents SDK writes a strict function schema
    "type": "object", "properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
    "title": "get_weather_args", "additionalProperties": False,
}
WEATHER_TOOL = {"name": "get_weather", "parameters": WEATHER_PARAMS, "strict": True, "type": "function",
                "description": "The weather in a city."}
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def sdk_body(**overrides) -> dict:
    """A body as agents.models.openai_responses builds it (input from ItemHelpers, tools from Converter)."""
    body = {"model": "tandem", "input": [{"content": "Weather in Paris?", "role": "user"}], "include": [],
            "instructions": "You answer weather questions.", "tools": [WEATHER_TOOL]}
    return body | overrides


def req_of(**overrides) -> ResponsesRequest:
    return ResponsesRequest.model_validate(sdk_body(**overrides))


def answer_of(text: str, tools: bool, finish: str = "stop", calls=None) -> Answer:
    """The whole answer Replies.whole (router.gateway.replies) makes of the model's answer text
    (`calls`: the calls a stream read, instead of reading `text` whole)."""
    content, read = read_answer(text, tools)
    if calls is not None:
        content, read = (None, calls) if calls else (text, [])
    finish = "tool_calls" if read and finish == "stop" else finish
    return Answer(content=content, calls=read, finish_reason=finish, prompt_tokens=12, output_tokens=7, logprobs=None, tandem=TANDEM)


def stream_parts(text: str, tools: bool, finish: str = "stop", piece: int = 5) -> list:
    """The parts Replies.parts (router.gateway.replies) yields for `text`, fed `piece` characters at a time."""
    reader = CallReader(tools)
    parts = [p for i in range(0, len(text), piece) for p in reader.feed(text[i : i + piece])] + reader.finish()
    return parts + [Finished(answer_of(text, tools, finish, calls=reader.calls if reader.calling else []))]


async def aiter_of(parts: list):
    for part in parts:
        yield part


def streamed(req: ResponsesRequest, parts: list) -> list[dict]:
    """Every event for a stream's parts, each validated as one of OpenAI's stream events."""
    translator = ResponseEvents(req, new_response_id())
    events = translator.start()
    for part in parts:
        events += translator.feed(part)
    events += translator.finish()
    for e in events:
        EVENT.validate_python(e)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]
