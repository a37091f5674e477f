"""A validated API request as the gateway serves it (`Call`), built from the OpenAI wire format.

The request models of `router.gateway.openai_api` say what a client may send; a `Call` is what the
gateway needs of it: the `GenerationRequest` for the engine (sampling filled in, mode and canvas
left to routing), the `RouteRequest` routing reads, and how to answer (chat or text, streamed,
with usage, a compiled response_format check).
"""

from __future__ import annotations

import dataclasses
import math

from engines.defaults import DEFAULT_MAX_TOKENS
from engines.errors import InvalidRequestError
from engines.skeleton import schema_instruction
from engines.types import GenerationRequest
from router.gateway.structured import OutputSpec
from router.decision.types import RouteRequest

TIMEOUT_HEADER = "x-tandem-timeout-s"  # a client's own deadline (seconds), honoured with the app's client_timeouts


@dataclasses.dataclass
class Call:
    """One validated API request, as the gateway serves it."""

    chat: bool  # chat completion (else text completion)
    model: str  # the alias the client asked for
    gen: GenerationRequest  # prompt or messages, and sampling; mode and canvas are filled in by routing
    route: RouteRequest  # what routing reads
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage
    output: OutputSpec = dataclasses.field(default_factory=OutputSpec)  # tools and grammar; default: free text
    request_id: str = ""


def chat_call(req, headers: dict[str, str], output: OutputSpec) -> Call:
    """A validated `ChatCompletionRequest` (with its checked `output`) as the gateway serves it."""
    messages = req.engine_messages()
    if output.schema is not None:  # the model reads the schema it answers under (as the task suite trains it)
        messages = [{"role": "system", "content": schema_instruction(output.schema)}] + messages
    gen = _sampling(req, GenerationRequest(messages=messages, tools=[t.template() for t in output.tools] or None,
                                           grammar=output.grammar, constrained_opener=output.constrained_opener,
                                           skeleton=output.skeleton, skeleton_optional=output.skeleton_optional,
                                           logprobs=(req.top_logprobs or 0) if req.logprobs else None))
    fmt = req.response_format.model_dump() if req.response_format else None
    route = _route(req, req.engine_messages(), headers, fmt, req.tools).model_copy(update={
        "structured": output.structured, "skeleton": output.skeleton is not None, "logprobs": gen.logprobs is not None})
    return Call(chat=True, model=req.model, gen=gen, route=route, stream=req.stream,
                include_usage=bool(req.stream_options and req.stream_options.include_usage), output=output)


def completion_call(req, headers: dict[str, str]) -> Call:
    """A validated `CompletionRequest` as the gateway serves it."""
    gen = _sampling(req, GenerationRequest(prompt=req.prompt, logprobs=req.logprobs))
    route = _route(req, [{"role": "user", "content": req.prompt}], headers, None, None).model_copy(update={"logprobs": req.logprobs is not None})
    return Call(chat=False, model=req.model, gen=gen, route=route,
                stream=req.stream, include_usage=bool(req.stream_options and req.stream_options.include_usage))


# The seed of a greedy request that names none. Greedy (temperature 0, or omitted) asks for one answer,
# but block mode draws its canvas noise whatever the temperature: unseeded, the same tool call or
# JSON answer could come back different each time it is asked, and differ again under load.
GREEDY_SEED = 0


def _sampling(req, gen: GenerationRequest) -> GenerationRequest:
    temperature = req.temperature or 0.0
    seed = req.seed if req.seed is not None or temperature > 0 else GREEDY_SEED
    return dataclasses.replace(gen, max_new_tokens=req.token_budget() or DEFAULT_MAX_TOKENS, temperature=temperature,
                               top_p=req.top_p or 1.0, stop=req.stop or [], seed=seed,
                               stop_token_ids=[] if req.ignore_eos else None)  # None: the checkpoint's end-of-sequence ids


def _route(req, messages: list[dict], headers: dict[str, str], response_format: dict | None, tools):
    api_key = headers.get("authorization", "").partition(" ")[2] or None
    return RouteRequest(messages=messages, model=req.model, max_tokens=req.token_budget(), response_format=response_format, tools=tools,
                        stop=req.stop, headers=headers, api_key=api_key)


def client_timeout(headers: dict[str, str]) -> float | None:
    """The deadline a client asks for in `x-tandem-timeout-s` (seconds, a finite number > 0), or
    None without the header; anything else is a 400 naming the header."""
    value = headers.get(TIMEOUT_HEADER)
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidRequestError(f"{TIMEOUT_HEADER} must be a positive number of seconds, got {value[:32]!r}",
                                  param=TIMEOUT_HEADER, code="invalid_value")
    return seconds
