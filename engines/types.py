"""Typed request and result of the engine, shared by every decoding mode."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from engines.defaults import DEFAULT_MAX_TOKENS

Mode = Literal["block", "verified", "ar"]  # how a request is decoded
MODES: tuple[Mode, ...] = ("block", "verified", "ar")
# The kind of engine work a mode is priced by in the cost profile (engines.cost): canvases or AR
# tokens; verified rides on the block engine's. The split layout names its deployments after them;
# which deployment serves a mode is the app's layout's to say (router.decision.layouts).
Engine = Literal["block", "ar"]
ENGINE_OF_MODE: dict[Mode, Engine] = {"block": "block", "verified": "block", "ar": "ar"}
# The batches a mode's requests decode in on any replica (engines.replica.scheduler): canvases (block) or
# tokens (verified, and AR as rows that never draft: one encoder pass over one KV cache serves both).
Lane = Literal["canvas", "tokens"]
LANE_OF_MODE: dict[Mode, Lane] = {"block": "canvas", "verified": "tokens", "ar": "tokens"}
LANES: tuple[Lane, ...] = ("canvas", "tokens")
FinishReason = Literal["stop", "length", "cancelled"]


@dataclass
class GenerationRequest:
    """One completion to decode. Give exactly one of `prompt` (text or token ids) and `messages` (chat)."""

    prompt: str | list[int] | None = None  # raw text is tokenized as is; token ids are used verbatim
    messages: list[dict] | None = None  # chat turns, rendered with the checkpoint's chat template
    tools: list[dict] | None = None  # function definitions {name, description, parameters}, for the chat template
    # An llguidance grammar (serialized) the answer must follow: JSON Schema, tool calls. AR and
    # verified mode decode under its token mask; block mode refuses it (engines.grammar.constraint).
    grammar: str | None = None
    # The fixed skeleton of a structured answer (engines.skeleton.Template): block mode seeds its
    # canvas with it and denoises only the value slots (engines.modes.seeded); the grammar checks the result.
    skeleton: tuple | None = None
    # The answer may also be something else (tool_choice auto: a call or a text answer): the skeleton
    # is used only when the model's first token, under the grammar, is where the skeleton starts.
    skeleton_optional: bool = False
    logprobs: int | None = None  # None: none; k >= 0: each output token's log-probability and the k most likely (AR distribution)
    mode: Mode = "block"  # block: diffusion canvases; verified: diffusion drafts checked by AR; ar: token by token
    max_new_tokens: int = DEFAULT_MAX_TOKENS  # hard cap on output tokens (finish_reason "length" when hit)
    # Sampling. temperature 0 is greedy (argmax) in AR and verified modes; block mode always samples its
    # canvas with the library's temperature schedule (t_max -> t_min) and commits the argmax.
    temperature: float = 0.0
    top_p: float = 1.0  # nucleus mass kept, in (0, 1]
    top_k: int = 0  # keep the k most likely tokens; 0 keeps all
    stop: list[str] = field(default_factory=list)  # stop strings; excluded from the output text
    # Under a `grammar`, stop strings never cut the constrained span (engines.decode.rows.Row): they
    # apply only to a free-text answer the grammar also allows, one that does not begin with this
    # opener (tool_choice auto: "<tool_call>"). None with a grammar: the whole answer is constrained
    # (JSON, a required call) and no stop string applies.
    constrained_opener: str | None = None
    stop_token_ids: list[int] | None = None  # None: the checkpoint's eos ids
    seed: int | None = None  # same seed, same request -> same output in every mode, alone or batched
    # Block mode (and the drafts of verified mode). None takes the checkpoint's generation config.
    canvas: int | None = None  # canvas size, <= config.canvas_length
    # The answer's expected length (the router's p90 prediction), or None: verified mode sizes its
    # first draft to hold it (engines.modes.verified_drafting.first_canvas).
    expected_tokens: int | None = None
    max_denoising_steps: int | None = None
    t_min: float | None = None
    t_max: float | None = None
    stability_threshold: int | None = None  # steps the argmax canvas must stay unchanged to stop early
    confidence_threshold: float | None = None  # mean entropy under which a stable canvas stops early
    entropy_bound: float | None = None  # entropy-bound sampler: accept tokens while summed entropy stays under it
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass
class DecodeStats:
    """What decoding one request cost. A *forward* is one model call (encoder or decoder)."""

    prompt_tokens: int = 0
    output_tokens: int = 0
    encoder_calls: int = 0  # prefill, canvas commits, AR steps
    decoder_calls: int = 0  # denoising steps
    steps_per_canvas: list[int] = field(default_factory=list)
    # wall-clock (time.time_ns) start and end of each canvas (block) or draft-and-verify round
    # (verified), shared by the rows decoded together: what the gateway's trace spans show
    canvas_times_ns: list[tuple[int, int]] = field(default_factory=list)
    drafted: int = 0  # verified mode: draft tokens put up for verification
    accepted: int = 0  # verified mode: draft tokens that equalled the AR choice (tokens written by drafts)
    ar_tokens: int = 0  # verified mode: tokens written by AR steps (each round's correction, and rows drafting paused)
    looked_up: int = 0  # AR and verified mode: tokens written by prompt-lookup guesses AR agreed with (engines.modes.ar_lookup)
    seeded_fallback: bool = False  # constrained AR wrote some of a skeleton-seeded answer (engines.modes.seeded, engines.modes.seeded_ar)
    # A skeleton-seeded answer's slot value tokens (None for any other answer): those its canvases
    # wrote, and those constrained AR wrote (the slots the grammar refused, with the token that ends
    # each; every token AR wrote where the skeleton could not be followed)
    slot_tokens_block: int | None = None
    slot_tokens_ar: int | None = None
    prefix_tokens_reused: int = 0  # prompt tokens whose KV came from the prefix cache (engines.batch.prefix_cache)
    closed_early: bool = False  # a constrained answer was steered to close as max_new_tokens ran low (engines.grammar.constraint)
    latency_s: float = 0.0

    @property
    def forwards(self) -> int:
        return self.encoder_calls + self.decoder_calls

    @property
    def tokens_per_forward(self) -> float:
        """Output tokens per model call after the prompt's prefill. On one canvas this is transformers'
        `tokens_per_forward` (tokens / denoising steps); the commit pass between canvases counts too."""
        return self.output_tokens / max(1, self.forwards - 1)

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "encoder_calls": self.encoder_calls,
            "decoder_calls": self.decoder_calls,
            "forwards": self.forwards,
            "steps_per_canvas": list(self.steps_per_canvas),
            "tokens_per_forward": round(self.tokens_per_forward, 3),
            "drafted": self.drafted,
            "accepted": self.accepted,
            "ar_tokens": self.ar_tokens,
            "looked_up": self.looked_up,
            "prefix_tokens_reused": self.prefix_tokens_reused,
            "slot_tokens_block": self.slot_tokens_block,
            "slot_tokens_ar": self.slot_tokens_ar,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "latency_ms": round(self.latency_s * 1000, 2),
        }


@dataclass
class EngineLoad:
    """One engine replica's occupancy, as its deployment reports it (load-aware routing, /admin/stats)."""

    queued: int  # requests waiting for a batch slot
    running: int  # rows decoding now
    capacity: int  # rows one step decodes together (max_batch_size)
    max_queue: int  # waiting requests beyond which the replica answers 429
    stats: dict = field(default_factory=dict)  # the scheduler's counters: submitted, completed, rejected, ...
    # mode -> its requests here, waiting or decoding: on a replica serving several modes, which of
    # them take turns at the decode thread now (the routing view prices a shared replica by it)
    by_mode: dict[str, int] = field(default_factory=dict)
    lane_threads: int = 1  # its decode threads: 1, the lanes take turns at one; 2, each lane decodes on its own
    pid: int | None = None  # the replica's process
    rss_mb: float | None = None  # its resident memory
    node: str | None = None  # the Ray node it runs on (placement on a multi-node cluster)
    replica: str | None = None  # its Ray actor's name (Serve's replica id): the gateway asks Ray whether it still lives

    @property
    def queue_ratio(self) -> float:
        return self.queued / max(1, self.max_queue)


@dataclass
class EngineInfo:
    """What an engine replica serves."""

    checkpoint: str  # the checkpoint directory's name (its path stays private to the replica)
    modes: list[Mode]  # modes this replica takes
    canvas_length: int  # the largest canvas the model denoises
    context_length: int  # prompt + answer tokens the model can hold
    max_chars_per_token: int | None = None  # the most characters one token covers (engines.prompt_bounds); None: no such bound
    # name, parameters, source (a package pin or a directory), sha256 of the imported file (None: not imported),
    # adapters (their step and held-out score) where merged: engines.model.loading.checkpoint_facts
    facts: dict = field(default_factory=dict)


@dataclass
class GenerationResult:
    request_id: str
    mode: Mode
    text: str  # decoded output, cut before any stop string
    token_ids: list[int]  # output tokens, stop token excluded
    finish_reason: FinishReason
    stats: DecodeStats
    # per output token, when asked: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}
    logprobs: list[dict] | None = None
    stop_token: int | None = None  # the stop token that ended the answer (not in token_ids); None when it ended otherwise

    @property
    def checked_ids(self) -> list[int]:
        """What shadow verification checks: the answer's tokens and the stop token that ended it, so
        that an answer which stopped where AR goes on does not count as AR's."""
        return self.token_ids + ([self.stop_token] if self.stop_token is not None else [])
