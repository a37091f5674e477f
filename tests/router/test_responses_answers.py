"""The Responses API's answer out (router/gateway/responses_answers.py): a typed whole answer as a
`response` object, checked against the `openai` package's own `Response` type."""

from __future__ import annotations

import json

from openai.types.responses import Response

from router.gateway.responses_answers import new_response_id, to_response
from tests.router.responses_factories import CALL, TANDEM, answer_of, req_of


def test_text_answer_is_a_completed_response_openai_accepts():
    req = req_of(metadata={"team": "a"}, max_output_tokens=100, temperature=0.2)
    rid = new_response_id()
    resp = to_response(answer_of("It is sunny.", tools=True), req, rid)
    parsed = Response.model_validate(resp)
    assert parsed.id == rid and rid.startswith("resp_") and parsed.status == "completed" and parsed.output_text == "It is sunny."
    assert resp["output"][0]["id"].startswith("msg_") and parsed.incomplete_details is None
    assert parsed.usage.input_tokens == 12 and parsed.usage.output_tokens == 7 and parsed.usage.total_tokens == 19
    assert (parsed.metadata, parsed.max_output_tokens, parsed.temperature, parsed.instructions) == ({"team": "a"}, 100, 0.2,
                                                                                                    "You answer weather questions.")
    assert parsed.tools[0].name == "get_weather" and parsed.tool_choice == "auto" and parsed.parallel_tool_calls is True
    assert resp["tandem"] == TANDEM


def test_tool_calls_are_function_call_items_keeping_the_call_id():
    answer = answer_of(CALL + CALL.replace("Paris", "Rome"), tools=True)
    resp = to_response(answer, req_of(), new_response_id())
    parsed = Response.model_validate(resp)
    chat_ids = [c.id for c in answer.calls]
    assert [(o.type, o.call_id, o.name, json.loads(o.arguments)) for o in parsed.output] == [
        ("function_call", chat_ids[0], "get_weather", {"city": "Paris"}), ("function_call", chat_ids[1], "get_weather", {"city": "Rome"})]
    assert all(o["id"].startswith("fc_") and o["status"] == "completed" for o in resp["output"])


def test_length_is_incomplete_for_max_output_tokens():
    resp = to_response(answer_of("It is sun", tools=False, finish="length"), req_of(max_output_tokens=3), new_response_id())
    parsed = Response.model_validate(resp)
    assert parsed.status == "incomplete" and parsed.incomplete_details.reason == "max_output_tokens"
    assert parsed.output[0].status == "incomplete" and parsed.output_text == "It is sun"


def test_named_tool_choice_and_json_format_are_echoed_as_openai_writes_them():
    text = {"format": {"type": "json_schema", "name": "final_output", "schema": {"type": "object"}, "strict": True}}
    req = req_of(tool_choice={"type": "function", "name": "get_weather"}, text=text)
    parsed = Response.model_validate(to_response(answer_of(CALL, tools=True), req, new_response_id()))
    assert parsed.tool_choice.name == "get_weather" and parsed.text.format.type == "json_schema"
    assert parsed.text.format.schema_ == {"type": "object"}
