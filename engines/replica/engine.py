"""The engine: one DiffusionGemma checkpoint decoded three ways; what a replica's scheduler drives.

Contract (served: engines.replica.scheduler calls these, and nothing else decodes on a replica)
------------------------------------------------------------------------------------------------
- `validate(request) -> (prompt ids, BlockParams | None)`: check everything a request can get wrong
  and tokenize its prompt; raises `InvalidRequestError` / `ContextLengthError` (HTTP 400) before any
  model call, naming the limit. The settings it returns are the request's batch key's half
  (engines.replica.lanes.BatchKey): requests with equal keys decode in one batch.
- `row(request, ids, on_text, on_done) -> Row`: the request's decode state (engines.decode.rows).
- `steps(rows, mode, params, admit, max_batch) -> Steps[None]`: the batch's decode loop, one step per
  `next()` (engines.decode.loop): the modes' table picks it (engines.modes.loops) and the engine's
  settings reach it in one `LoopContext`. `admit` hands over newcomers between steps.
- `agreement`, `logprobs`: one encoder pass over a finished answer (engines.decode.scoring).

The thread-per-request helper (`generate`, `generate_batch`, `stream`, `run`: engines.replica.direct)
is mixed in for tests, benchmarks and warm-up; a replica never serves through it.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from engines.batch.compiled import compile_model
from engines.batch.prefix_cache import DEFAULT_CACHE_TOKENS, PrefixCache, message_bounds
from engines.cost import CostProfile
from engines.decode.canvas_settings import BlockParams
from engines.decode.loop import LoopContext
from engines.decode.rows import Admit, Row
from engines.decode.sampling import make_generator
from engines.decode.scoring import agreement, answer_logprobs
from engines.decode.steps import Steps
from engines.errors import ContextLengthError, InvalidRequestError
from engines.grammar.constraint import GrammarTokenizer
from engines.model.loading import LoadedModel, load_checkpoint
from engines.model.quantization import quantize_weights
from engines.modes.loops import loop_of
from engines.modes.seeded import Seeder
from engines.modes.verified_drafting import DraftCosts
from engines.prompt_bounds import PromptEncoder
from engines.replica.direct import DirectDecoding
from engines.types import MODES, GenerationRequest


class DiffusionEngine(DirectDecoding):
    def __init__(self, loaded: LoadedModel, prefix_cache_tokens: int = DEFAULT_CACHE_TOKENS, compile: str = "off"):
        self.model = loaded.model
        self.compiled = compile_model(self.model, compile)  # engines.batch.compiled: the model's calls, compiled in place
        self.tokenizer = loaded.tokenizer
        self.path = loaded.path
        self.facts = loaded.facts  # what the checkpoint is (engines.model.loading.checkpoint_facts)
        self.config = loaded.model.config
        text = self.config.text_config
        self.vocab_size = text.vocab_size
        self.context_length = text.max_position_embeddings
        self.pad_id = text.pad_token_id
        self.defaults = self.model.generation_config
        eos = self.defaults.eos_token_id if self.defaults.eos_token_id is not None else text.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else eos)
        self.grammar_tokenizer = GrammarTokenizer(self.tokenizer, self.vocab_size)
        self.prompt_encoder = PromptEncoder(self.tokenizer, self.context_length)  # bounded prompt checks (engines.prompt_bounds)
        filler = min(self.eos_ids)
        self.seeder = Seeder(self.tokenizer, filler, self.grammar_tokenizer.texts, self.vocab_size)
        self.draft_costs = DraftCosts(CostProfile.load(self.path))  # verified mode prices its drafts with it
        self.prefix_cache = PrefixCache(prefix_cache_tokens) if prefix_cache_tokens > 0 else None
        self.sure_entropy: float | None = None  # verified: where a row alone drafts (None: engines.modes.verified_drafting.SURE_ENTROPY)
        self.lookup = True  # greedy AR steps (AR mode, verified's) check prompt-lookup guesses (engines.modes.ar_lookup)
        self.stop_check_every = 1  # denoising steps between host reads of the stop flags (engines.decode.canvas_settings.StopFlags)
        self._lock = threading.Lock()  # the thread-per-request helper's: one group at a time (engines.replica.direct)

    @classmethod
    def from_checkpoint(cls, path: str | Path, dtype: str = "float32", device: str = "cpu",
                        prefix_cache_tokens: int = DEFAULT_CACHE_TOKENS, compile: str = "off", quantization: str = "none") -> "DiffusionEngine":
        loaded = load_checkpoint(path, dtype=dtype, device=device)
        quantize_weights(loaded.model, quantization)  # engines.model.quantization: FP8 weights, before any call compiles
        return cls(loaded, prefix_cache_tokens, compile)

    # ---- validation -------------------------------------------------------------------------

    def block_params(self, req: GenerationRequest) -> BlockParams:
        d = self.defaults
        pick = lambda value, default: default if value is None else value  # noqa: E731
        # verified drafts are seeded only where the skeleton is sure to be the answer's (a text answer would reject it)
        seeded = req.skeleton is not None and (req.mode == "block" or not req.skeleton_optional)
        return BlockParams(
            # a seeded canvas is sized by its layout: one canvas setting lets every seeded request batch together
            canvas=self.config.canvas_length if seeded else pick(req.canvas, self.config.canvas_length),
            steps=pick(req.max_denoising_steps, d.max_denoising_steps or 12),
            t_min=float(pick(req.t_min, d.t_min if d.t_min is not None else 0.4)),
            t_max=float(pick(req.t_max, d.t_max if d.t_max is not None else 0.8)),
            stability_threshold=pick(req.stability_threshold, d.stability_threshold if d.stability_threshold is not None else 1),
            confidence_threshold=float(pick(req.confidence_threshold, d.confidence_threshold or 0.005)),
            entropy_bound=float(pick(req.entropy_bound, d.sampler_config.entropy_bound if d.sampler_config else 0.1)),
            seeded=seeded,
            check_every=self.stop_check_every,
        )

    @property
    def verified_params(self) -> BlockParams:
        """A verified request's settings by default: the batch AR requests decode in when no verified request
        waits (engines.replica.scheduler: AR rows ride in verified's loop and never draft)."""
        return replace(self.block_params(GenerationRequest(prompt=[0], mode="verified")), canvas=self.config.canvas_length)

    def prompt_ids(self, req: GenerationRequest) -> list[int]:
        try:
            return self._prompt_ids(req)
        except (TypeError, UnicodeError) as exc:  # text the tokenizer cannot take is the client's error
            raise InvalidRequestError(f"the prompt cannot be tokenized: {type(exc).__name__}: {exc}", param="messages") from None

    def _prompt_ids(self, req: GenerationRequest) -> list[int]:
        """The prompt's token ids, bounded (engines.prompt_bounds): a prompt that cannot fit with
        max_new_tokens is refused by its length before it is rendered, or as soon as its
        tokenization counts past the room left, never tokenized whole."""
        if (req.prompt is None) == (req.messages is None):
            raise InvalidRequestError("give exactly one of `prompt` and `messages`", param="prompt")
        answer = req.max_new_tokens if isinstance(req.max_new_tokens, int) else 0
        room = self.context_length - answer
        self.prompt_encoder.check_chars(req.messages, req.prompt, answer)
        if req.messages is not None:
            if not req.messages or not any(str(m.get("content") or "").strip() for m in req.messages):
                raise InvalidRequestError("`messages` is empty: at least one message needs content", param="messages")
            text = self.tokenizer.apply_chat_template(req.messages, tools=req.tools or None, add_generation_prompt=True, tokenize=False)
            return self.prompt_encoder.encode(text, room, answer, param="messages")
        if isinstance(req.prompt, str):
            if not req.prompt.strip():
                raise InvalidRequestError("`prompt` is empty", param="prompt")
            return [self.tokenizer.bos_token_id] + self.prompt_encoder.encode(req.prompt, room - 1, answer, param="prompt")
        ids = list(req.prompt)
        if not ids:
            raise InvalidRequestError("`prompt` is empty", param="prompt")
        if any(not isinstance(t, int) or not 0 <= t < self.vocab_size for t in ids):
            raise InvalidRequestError(f"prompt token ids must be integers in [0, {self.vocab_size})", param="prompt")
        return ids

    def prefix_bounds(self, req: GenerationRequest, ids: list[int]) -> tuple[int, ...]:
        """Where a conversation's prompt is cut for its prefill (engines.batch.prefix_cache.message_bounds);
        () without a prefix cache."""
        if self.prefix_cache is None or not req.messages:
            return ()
        return message_bounds(self.tokenizer, req.messages, req.tools, ids)

    def prefix_length(self, req: GenerationRequest, ids: list[int]) -> int:
        """How many leading tokens of `ids` a later turn can find in the prefix cache (0: none)."""
        bounds = self.prefix_bounds(req, ids)
        return bounds[-1] if bounds else 0

    def validate(self, req: GenerationRequest) -> tuple[list[int], BlockParams | None]:
        """Check everything a request can get wrong; raise a typed error naming the limit."""
        if req.mode not in MODES:
            raise InvalidRequestError(f"mode must be one of {list(MODES)}, got {req.mode!r}", param="mode")
        if not isinstance(req.max_new_tokens, int) or req.max_new_tokens <= 0:
            raise InvalidRequestError(f"max_new_tokens must be a positive integer, got {req.max_new_tokens!r}", param="max_tokens")
        if not req.temperature >= 0:
            raise InvalidRequestError(f"temperature must be >= 0, got {req.temperature!r}", param="temperature")
        if not 0 < req.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {req.top_p!r}", param="top_p")
        if not isinstance(req.top_k, int) or req.top_k < 0:
            raise InvalidRequestError(f"top_k must be an integer >= 0, got {req.top_k!r}", param="top_k")
        if any(not isinstance(s, str) or not s for s in req.stop):
            raise InvalidRequestError("stop strings must be non-empty strings", param="stop")
        if req.grammar is not None and ((req.mode == "block" and req.skeleton is None) or not isinstance(req.grammar, str)):
            raise InvalidRequestError("block mode decodes under a grammar (JSON schema, tools) only with a skeleton: "
                                      "use verified or ar mode", param="response_format", code="unsupported_mode")
        if req.skeleton is not None and not (isinstance(req.skeleton, tuple) and req.skeleton):
            raise InvalidRequestError("skeleton must be a non-empty engines.skeleton.Template", param="response_format")
        if req.logprobs is not None and (req.mode == "block" or not isinstance(req.logprobs, int) or not 0 <= req.logprobs <= 20):
            raise InvalidRequestError("logprobs need ar or verified mode (block mode's tokens are not drawn from the AR "
                                      "distribution) and 0 to 20 top_logprobs", param="logprobs", code="unsupported_mode")
        params = self.block_params(req) if req.mode != "ar" else None
        if params is not None:
            limit = self.config.canvas_length
            if not 1 <= params.canvas <= limit:
                raise InvalidRequestError(f"canvas must be in [1, {limit}] (config.canvas_length), got {params.canvas}", param="canvas")
            if not 1 <= params.steps <= 1000:
                raise InvalidRequestError(f"max_denoising_steps must be in [1, 1000], got {params.steps}", param="max_denoising_steps")
            if not 0 <= params.t_min < params.t_max:
                raise InvalidRequestError(f"need 0 <= t_min < t_max, got t_min={params.t_min}, t_max={params.t_max}", param="t_min")
            if params.stability_threshold < 0 or params.confidence_threshold <= 0 or params.entropy_bound <= 0:
                raise InvalidRequestError(
                    "stability_threshold must be >= 0, confidence_threshold and entropy_bound > 0", param="entropy_bound"
                )
        ids = self.prompt_ids(req)
        # One limit for every mode: prompt + max_new_tokens positions. Block and verified mode never
        # use a position past the context: a canvas (or draft) that would run past it is sized down
        # to the positions left (engines.modes.block.split_near_the_end), and those always hold what the
        # request may still write. So a request AR can serve, block and verified can serve too.
        if len(ids) + req.max_new_tokens > self.context_length:
            raise ContextLengthError(
                f"prompt of {len(ids)} tokens plus max_tokens {req.max_new_tokens} exceeds the context of "
                f"{self.context_length} tokens; shorten the prompt or lower max_tokens",
                param="messages" if req.messages is not None else "prompt",
            )
        if req.mode == "verified" and not params.seeded:
            # A verified row caps its drafts at its own canvas and step count (its DraftControl), so
            # verified requests that differ only in them batch together, and with AR's rows, which ride
            # in verified's batches (engines.replica.scheduler): keyed apart, 8 concurrent requests of three
            # predicted lengths decoded as three batches taking turns.
            params = replace(params, canvas=self.config.canvas_length, steps=self.verified_params.steps)
        return ids, params

    def row(self, req: GenerationRequest, ids: list[int], on_text=None, on_done=None) -> Row:
        stop_ids = frozenset(req.stop_token_ids) if req.stop_token_ids is not None else self.eos_ids
        return Row(
            request=req,
            prompt_ids=ids,
            stop_ids=stop_ids,
            generator=make_generator(req.seed, self.model.device),
            decode=lambda t: self.tokenizer.decode(t, skip_special_tokens=True),
            on_text=on_text,
            on_done=on_done,
            constraint=self.grammar_tokenizer.constraint(req.grammar, req.max_new_tokens, req.constrained_opener) if req.grammar is not None else None,
            **({"prefix_cache": self.prefix_cache, "prefix_bounds": b} if (b := self.prefix_bounds(req, ids)) else {}),
        )

    # ---- decoding ---------------------------------------------------------------------------

    def steps(self, rows: list[Row], mode: str, params: BlockParams | None, admit: Admit | None = None, max_batch: int = 0) -> Steps[None]:
        """The decode loop of one compatible batch (engines.modes.loops), one step per `next()`: the scheduler
        interleaves the lanes' batches; `admit` hands over newcomers between steps, up to `max_batch` rows."""
        ctx = LoopContext(self.model, self.pad_id, admit, max_batch, lookup=self.lookup, seeder=self.seeder,
                          draft_costs=self.draft_costs, sure_entropy=self.sure_entropy)
        return loop_of(mode, params)(rows, params, ctx)

    def agreement(self, request: GenerationRequest, answer_ids: list[int]) -> int:
        """How many leading tokens of `answer_ids` (e.g. a block answer, with the stop token it ended
        on: `GenerationResult.checked_ids`) the model's greedy AR choice would accept: one encoder
        pass over prompt + answer, as verified mode's commit pass does."""
        stops = frozenset(request.stop_token_ids) if request.stop_token_ids is not None else self.eos_ids
        return agreement(self.model, self.prompt_ids(request), answer_ids, stops)

    def logprobs(self, request: GenerationRequest, answer_ids: list[int], top: int) -> list[dict]:
        """Each answer token's log-probability under the model's AR distribution (before
        temperature and grammar), with the `top` most likely tokens (engines.decode.scoring)."""
        return answer_logprobs(self.model, self.tokenizer.decode, self.prompt_ids(request), answer_ids, top)
