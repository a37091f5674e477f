"""Calls (router/gateway/calls.py): a validated OpenAI body becomes what the gateway serves: the
engine's request with sampling filled in once (max_tokens' default included), what routing reads
(only the client's own cap, its key, its tools), how to answer; and a client's own deadline header."""

from __future__ import annotations

import pytest

from engines.defaults import DEFAULT_MAX_TOKENS
from engines.errors import InvalidRequestError
from engines.skeleton import schema_instruction
from router.gateway.calls import GREEDY_SEED, TIMEOUT_HEADER, chat_call, client_timeout, completion_call
from router.gateway.openai_api import ChatCompletionRequest, CompletionRequest
from router.gateway.structured import output_spec

ASK = [{"role": "user", "content": "Extract the city as JSON: Ada lives in Paris."}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
HEADERS = {"authorization": "Bearer sk-team-a", "x-tandem-mode": "ar"}


def chat(**body):
    req = ChatCompletionRequest.model_validate({"model": "tandem", "messages": ASK} | body)
    return chat_call(req, HEADERS, output_spec(req))


def test_sampling_is_filled_once_and_routing_reads_only_the_clients_cap():
    bare = chat()
    assert bare.gen.max_new_tokens == DEFAULT_MAX_TOKENS and bare.route.max_tokens is None  # the default is the engine's, not a signal
    assert (bare.gen.temperature, bare.gen.top_p, bare.gen.stop, bare.gen.seed) == (0.0, 1.0, [], GREEDY_SEED)  # greedy unless asked
    capped = chat(max_completion_tokens=40, max_tokens=80, temperature=0.7, top_p=0.9, stop=["\n"], seed=3)
    assert capped.gen.max_new_tokens == capped.route.max_tokens == 40  # max_completion_tokens wins, as OpenAI reads it
    assert (capped.gen.temperature, capped.gen.top_p, capped.gen.stop, capped.gen.seed) == (0.7, 0.9, ["\n"], 3)


def test_a_greedy_request_without_a_seed_gets_the_fixed_one_and_a_sampled_one_none():
    """Block mode draws canvas noise at any temperature: a greedy request is seeded so that it repeats."""
    assert chat(temperature=0.0).gen.seed == GREEDY_SEED and chat(temperature=0.0, seed=9).gen.seed == 9
    assert chat(temperature=0.8).gen.seed is None and chat(temperature=0.8, seed=9).gen.seed == 9


def test_ignore_eos_decodes_through_end_of_sequence_tokens_in_chat_and_text():
    """vLLM's extension: no stop token ends the answer (an empty list for the engine); by default the checkpoint's."""
    assert chat().gen.stop_token_ids is None and chat(ignore_eos=True).gen.stop_token_ids == []
    text = CompletionRequest.model_validate({"model": "tandem", "prompt": "Once", "ignore_eos": True})
    assert completion_call(text, HEADERS).gen.stop_token_ids == []


@pytest.mark.parametrize("field,value", [("logit_bias", {"17": -100}), ("frequency_penalty", 0.5), ("presence_penalty", -1)])
def test_a_field_that_would_change_the_answer_and_is_not_applied_is_refused_naming_it(field, value):
    from pydantic import ValidationError

    from router.gateway.openai_api import validation_error

    with pytest.raises(ValidationError) as caught:
        chat(**{field: value})
    error = validation_error(caught.value.errors())
    assert error.status == 400 and error.param == field and "not supported" in error.message


def test_those_fields_at_values_that_change_nothing_are_taken():
    assert chat(logit_bias={}, frequency_penalty=0, presence_penalty=0.0, user="u-1").gen.max_new_tokens == DEFAULT_MAX_TOKENS


def test_routing_reads_the_key_and_headers_and_the_answer_how_to_be_sent():
    call = chat(stream=True, stream_options={"include_usage": True}, logprobs=True, top_logprobs=2)
    assert call.chat and call.stream and call.include_usage and call.model == "tandem"
    assert call.route.api_key == "sk-team-a" and call.route.headers == HEADERS and call.route.messages == ASK
    assert call.gen.logprobs == 2 and call.route.logprobs
    assert chat().gen.logprobs is None and not chat().route.logprobs and not chat().include_usage


def test_a_json_schema_answer_is_decoded_under_its_grammar_and_told_its_schema():
    call = chat(response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}})
    assert call.gen.grammar and call.route.structured == "json_schema"
    assert call.gen.messages[0] == {"role": "system", "content": schema_instruction(SCHEMA)} and call.gen.messages[1:] == ASK
    assert call.route.messages == ASK  # routing reads the client's turns, not the instruction the gateway adds
    assert chat().gen.grammar is None and chat().gen.messages == ASK and chat().route.structured is None


def test_a_text_completion_is_a_prompt_without_chat_turns():
    req = CompletionRequest.model_validate({"model": "tandem-ar", "prompt": "Once upon", "max_tokens": 5, "logprobs": 1})
    call = completion_call(req, {})
    assert not call.chat and call.gen.prompt == "Once upon" and call.gen.messages is None
    assert call.gen.max_new_tokens == call.route.max_tokens == 5 and call.gen.logprobs == 1
    assert call.route.messages == [{"role": "user", "content": "Once upon"}] and call.route.api_key is None


@pytest.mark.parametrize("value, seconds", [(None, None), ("2.5", 2.5), ("30", 30.0)])
def test_a_clients_deadline_is_its_header_in_seconds(value, seconds):
    assert client_timeout({} if value is None else {TIMEOUT_HEADER: value}) == seconds


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf", ""])
def test_a_deadline_that_is_not_a_positive_number_is_a_400_naming_the_header(value):
    with pytest.raises(InvalidRequestError) as exc:
        client_timeout({TIMEOUT_HEADER: value})
    assert exc.value.status == 400 and exc.value.param == TIMEOUT_HEADER
