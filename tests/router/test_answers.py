"""A typed answer in OpenAI's shapes (router.gateway.answers): whole bodies and stream chunks that
the openai library's own models parse, tool calls with content null, a stream that starts with the
role, ends in [DONE] after usage when asked, and carries an error in-band."""

from __future__ import annotations

import asyncio
import json

from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from engines.errors import EngineUnavailableError
from router.gateway.answer_parts import Answer, CallArguments, CallStarted, Failed, Finished, TextDelta, ToolCall
from router.gateway.answers import DONE, completion_logprobs, stream_chunks, whole_answer
from router.gateway.calls import chat_call, completion_call
from router.gateway.openai_api import ChatCompletionRequest, CompletionRequest
from router.gateway.structured import output_spec

TANDEM = {"mode": "ar", "routed_mode": "ar", "policy_version": 3}
ASK = [{"role": "user", "content": "Weather in Oslo?"}]


def chat(**body):
    req = ChatCompletionRequest.model_validate({"model": "tandem", "messages": ASK} | body)
    c = chat_call(req, {}, output_spec(req))
    c.request_id = "chatcmpl-answers"
    return c


def completion(**body):
    c = completion_call(CompletionRequest.model_validate({"model": "tandem", "prompt": "Say hi"} | body), {})
    c.request_id = "cmpl-answers"
    return c


def answer(content: str | None = "Sunny.", calls=(), finish: str = "stop", logprobs=None) -> Answer:
    return Answer(content=content, calls=list(calls), finish_reason=finish, prompt_tokens=9, output_tokens=3, logprobs=logprobs, tandem=TANDEM)


def chunks_of(call, parts) -> list[str]:
    async def parts_gen():
        for p in parts:
            yield p

    async def collect():
        return [c async for c in stream_chunks(call, parts_gen())]

    return asyncio.run(collect())


def payloads(chunks: list[str]) -> list[dict]:
    assert chunks[-1] == DONE
    return [json.loads(c.removeprefix("data: ")) for c in chunks[:-1]]


def test_a_whole_chat_answer_is_an_openai_chat_completion():
    body = whole_answer(chat(), answer())
    parsed = ChatCompletion.model_validate(body)
    assert parsed.id == "chatcmpl-answers" and parsed.choices[0].message.content == "Sunny."
    assert parsed.usage.total_tokens == 12 and body["tandem"] == TANDEM


def test_a_calling_answer_has_its_tool_calls_and_no_content():
    call = ToolCall(0, "call_1", "get_weather", '{"city": "Oslo"}', complete=True)
    parsed = ChatCompletion.model_validate(whole_answer(chat(), answer(None, [call], "tool_calls")))
    message = parsed.choices[0].message
    assert message.content is None and parsed.choices[0].finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [("call_1", "get_weather", '{"city": "Oslo"}')]


def test_a_text_completion_has_its_text_and_logprobs_in_the_legacy_shape():
    entries = [{"token": "Hi", "logprob": -0.1, "top_logprobs": [{"token": "Hi", "logprob": -0.1}]},
               {"token": "!", "logprob": -0.5, "top_logprobs": [{"token": "!", "logprob": -0.5}, {"token": ".", "logprob": -1.2}]}]
    parsed = Completion.model_validate(whole_answer(completion(), answer("Hi!", logprobs=entries)))
    assert parsed.choices[0].text == "Hi!" and parsed.choices[0].logprobs.text_offset == [0, 2]
    assert completion_logprobs(entries)["top_logprobs"][1] == {"!": -0.5, ".": -1.2} and completion_logprobs(None) is None


def test_a_chat_stream_starts_with_the_role_and_ends_with_usage_then_done():
    call_parts = [CallStarted(ToolCall(0, "call_1", "get_weather")), CallArguments(0, '{"city": '), CallArguments(0, '"Oslo"}')]
    final = answer(None, [ToolCall(0, "call_1", "get_weather", '{"city": "Oslo"}', True)], "tool_calls")
    events = payloads(chunks_of(chat(stream=True, stream_options={"include_usage": True}), call_parts + [Finished(final)]))
    chunks = [ChatCompletionChunk.model_validate(e) for e in events]
    assert chunks[0].choices[0].delta.role == "assistant"
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or "" for c in chunks[1:4])
    assert arguments == '{"city": "Oslo"}' and chunks[1].choices[0].delta.tool_calls[0].id == "call_1"
    assert chunks[4].choices[0].finish_reason == "tool_calls" and events[4]["tandem"] == TANDEM
    assert chunks[5].choices == [] and chunks[5].usage.completion_tokens == 3


def test_a_failure_mid_stream_is_an_error_event_then_done():
    events = payloads(chunks_of(chat(stream=True), [TextDelta("Sun"), Failed(EngineUnavailableError("engine gone"))]))
    assert events[1]["choices"][0]["delta"] == {"content": "Sun"}
    assert "engine gone" in events[2]["error"]["message"]


def test_a_completion_stream_has_no_role_chunk():
    events = payloads(chunks_of(completion(stream=True), [TextDelta("Hi"), Finished(answer("Hi"))]))
    assert [(e["object"], e["choices"][0]["text"], e["choices"][0]["finish_reason"]) for e in events] == [
        ("text_completion", "Hi", None), ("text_completion", "", "stop")]
