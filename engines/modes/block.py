"""Block (diffusion) mode: denoise a canvas, commit it with an encoder pass, denoise the next.

One denoising step follows transformers' `DiffusionGemmaGenerationMixin._denoising_step`:
decoder pass -> linear temperature schedule -> sample every position -> the entropy-bound
sampler accepts low-entropy positions and renoises the rest -> stable-and-confident stop
check -> the step's logits become the next step's self-conditioning. The committed canvas is
the argmax canvas, as in the library, and a request decodes to the library's tokens. What
differs from `generate()`:

- the step's logits (B, C, V) are its only vocabulary-wide tensor: temperature is applied in
  place, and the draws, the entropies (once, for the sampler and the stop rule) and the next
  step's self-conditioning embeddings are computed slice by slice (`engines.model.logits`); the
  library holds several such tensors at once (about 2 GiB each at vocabulary 262,144, batch 8);

- the canvas size is per request (<= `config.canvas_length`), so a short answer need not
  pay for a 256-token canvas;
- random draws come from each request's own generator (see `engines.decode.sampling`);
- a request leaves the batch as soon as it stops (the library keeps decoding finished rows
  as padding until the whole batch is done), and output is cut at `max_new_tokens`; within a
  canvas, rows found stopped at a read of the stop flags leave the rows the steps compute;
- no position past the context (`max_position_embeddings`) is ever used: a row whose next
  canvas would run past it (the library always writes whole canvases) takes its last canvas
  sized down to the positions it has left, in a batch of its own (`split_near_the_end`), so
  prompt + `max_new_tokens` up to the context fit in every mode, as in AR.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.decode.canvas_settings import BlockParams, StopFlags, context_length
from engines.model import settle as canvas_step
from engines.batch.compiled import compiled_version, is_compiled, step_function
from engines.model.logits import CHUNK_ELEMENTS
from engines.batch.prefill import prefill
from engines.decode.loop import LoopContext
from engines.decode.rows import Row, retire
from engines.decode.sampling import RowSeededEntropyBoundSampler, schedule_temperature
from engines.decode.steps import Steps, drain


def denoise_canvas(
    batch: SequenceBatch, generators: list[torch.Generator], params: BlockParams, greedy: bool = False,
    abandon_above: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Draft one canvas per row after the rows' cached tokens. Verified mode's drafts: `greedy`
    takes the most likely token where block mode samples; with `abandon_above`, a row whose first
    step's mean entropy over the canvas's first PROBE_POSITIONS exceeds it (nats) stops there.
    Returns the argmax canvas (B, C), the denoising steps each row took (B,) and which rows were
    abandoned (B,)."""
    return drain(denoise_canvas_steps(batch, generators, params, greedy, abandon_above))


@torch.inference_mode()
def denoise_canvas_steps(
    batch: SequenceBatch, generators: list[torch.Generator], params: BlockParams, greedy: bool = False,
    abandon_above: float | None = None,
) -> Steps[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """`denoise_canvas`, yielding after every denoising pass (engines.decode.steps).

    Rows found stopped at a read of the stop flags leave the computed batch (`_Computed.drop`): the
    steps that follow run the decoder, the head and `settle` over the running rows only, where the
    library (and this loop before) kept computing a stopped row as padding until the last one stopped.
    Not where the model's calls replay CUDA graphs: each row count there is a graph of its own."""
    B, C, device = batch.size, params.canvas, batch.mask.device
    vocab = batch.model.config.text_config.vocab_size
    sampler = RowSeededEntropyBoundSampler(params.entropy_bound, C, vocab, generators, greedy)
    current = sampler.initialize_canvas(B, device)  # (B, C) uniform noise
    # (B, C, H) embeddings of the last step's logits; zeros before the first step, which is what the
    # decoder uses without a signal (one call signature for every step: one compiled variant)
    self_conditioning = torch.zeros(B, C, batch.model.config.text_config.hidden_size, dtype=batch.model.dtype, device=device)
    run = _Computed(batch, batch.canvas_inputs(C), current, self_conditioning, params.stability_threshold)
    abandoned = torch.zeros(B, dtype=torch.bool, device=device)
    bound = torch.tensor(float(params.entropy_bound), device=device)
    confident = torch.tensor(float(params.confidence_threshold), device=device)
    settle = step_function(batch.model)
    sample_and_settle = compiled_version(batch.model, canvas_step.sample_and_settle)
    # The draw inside the compiled step needs its races' draws as a tensor of twice the logits' bytes:
    # taken where the vocabulary is small (and the logits fit one of engines.model.logits' slices, checked per
    # step), on a CPU (whose generator's draws `exponentials_from_bits` finishes)
    race_in_step = is_compiled(batch.model) and not greedy and vocab <= RACE_IN_STEP_MAX_VOCAB and device.type == "cpu"
    flags = StopFlags(B, params.check_every)
    compact = not (is_compiled(batch.model) and device.type == "cuda")
    for step, remaining in enumerate(reversed(range(1, params.steps + 1))):  # denoising runs N..1, as in the library
        run.steps += ~run.done
        sampler.active = flags.running
        logits = run.batch.denoise(run.current, run.self_conditioning, run.inputs)  # (R, C, V)
        if abandon_above is not None and remaining == params.steps:  # the first step: every row is computed
            abandoned = run.abandoned = head_entropy(logits) > abandon_above
        if greedy and remaining == 1:  # a greedy draft's last step: only its argmax is used (skips ~1/4 of the step on a CPU)
            run.argmax = torch.where(run.done[:, None], run.argmax, logits.argmax(-1))
            break
        temperature = schedule_temperature(params.t_min, params.t_max, params.steps, remaining)
        if race_in_step and logits.numel() <= CHUNK_ELEMENTS:
            # compiled, small vocabulary: the draws' exponential races made here, the draw inside the compiled step
            race = sampler.race_bits(logits.shape, device)  # (R, C, V), from each row's generator
            noise = sampler.initialize_canvas(run.size, device)  # the renoise draw, after the sample as in the library
            state = (noise, run.current, run.argmax, run.self_conditioning, run.done, run.abandoned, run.history, bound, confident)
            settled = sample_and_settle(batch.model, logits, torch.tensor(temperature), race, *state)
            del race
        else:
            logits.div_(temperature)
            sampled = logits.argmax(-1) if greedy else sampler.sample(logits)  # (R, C), from each row's generator
            noise = sampler.initialize_canvas(run.size, device)  # the renoise draw, after the sample as in the library
            settled = settle(batch.model, logits, sampled, noise, run.current, run.argmax, run.self_conditioning, run.done,
                             run.abandoned, run.history, bound, confident)
        run.argmax, run.current, run.self_conditioning, run.done, run.history = settled
        del logits  # before the next step's logits exist
        if flags.read(run.done, step, remaining):
            if flags.all_stopped:
                break
            if compact and not all(flags.running):
                keep = [j for j, on in enumerate(flags.running) if on]
                run.drop(keep)
                sampler.generators = [sampler.generators[j] for j in keep]
                flags.running = [True] * len(keep)
        yield  # between denoising passes: another batch may step (the canvas's state waits in these locals)
    argmax, steps = run.results()
    return argmax, steps, abandoned


class _Computed:
    """The rows a canvas's steps still compute and their state: the batch (a copy of the running rows
    once some have left), the canvas, the last argmax canvas, the self-conditioning embeddings, the
    stop flags, the stop rule's history; the results of the rows that have left, by their index in
    the canvas's batch."""

    def __init__(self, batch: SequenceBatch, inputs, current: torch.Tensor, self_conditioning: torch.Tensor, stability: int):
        B, C = current.shape
        device = current.device
        self.batch, self.inputs, self.current, self.self_conditioning = batch, inputs, current, self_conditioning
        self.argmax = current
        self.done = torch.zeros(B, dtype=torch.bool, device=device)
        self.abandoned = torch.zeros(B, dtype=torch.bool, device=device)
        self.steps = torch.zeros(B, dtype=torch.long, device=device)
        self.history = torch.full((stability, B, C), -1, dtype=torch.long, device=device)  # the stop rule's
        self.rows = list(range(B))  # each computed row's index in the canvas's batch
        self.final_argmax = torch.empty_like(current)
        self.final_steps = torch.empty_like(self.steps)

    @property
    def size(self) -> int:
        return len(self.rows)

    def drop(self, keep: list[int]) -> None:
        """Go on with the computed rows `keep` (positions in the computed batch) only; the others' argmax
        canvas and step count are final."""
        self._store()
        index = torch.tensor(keep, dtype=torch.long, device=self.current.device)
        self.batch = self.batch.copy_rows(keep)
        self.inputs = self.batch.canvas_inputs(self.current.shape[1])
        self.current, self.argmax, self.self_conditioning = self.current[index], self.argmax[index], self.self_conditioning[index]
        self.done, self.abandoned, self.steps = self.done[index], self.abandoned[index], self.steps[index]
        self.history = self.history[:, index]
        self.rows = [self.rows[j] for j in keep]

    def results(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The argmax canvas (B, C) and the steps each row took (B,), every row of the canvas's batch."""
        self._store()
        return self.final_argmax, self.final_steps

    def _store(self) -> None:
        index = torch.tensor(self.rows, dtype=torch.long, device=self.current.device)
        self.final_argmax[index] = self.argmax
        self.final_steps[index] = self.steps


RACE_IN_STEP_MAX_VOCAB = 32_768  # vocabularies whose steps draw inside the compiled step (see denoise_canvas_steps)
PROBE_POSITIONS = 8  # the canvas positions whose first-step entropy says whether a draft is worth finishing


def head_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of the first PROBE_POSITIONS canvas positions per row: logits (B, C, V) -> (B,)."""
    head = torch.log_softmax(logits[:, :PROBE_POSITIONS].float(), dim=-1)
    return -(head.exp() * head).sum(-1).mean(-1)


def split_near_the_end(batch: SequenceBatch, canvas: int, context: int) -> tuple[list[int], list[tuple[int, SequenceBatch]]]:
    """Take out of `batch` every row whose next canvas of `canvas` tokens would run past `context`
    positions. Each goes on in a batch of its own, so that its canvas can be sized down to the
    positions it has left without changing any other row's canvas (a request gets the same tokens
    alone or batched). Returns (indices of the rows that stay, [(index, own batch)] of those that left)."""
    near = torch.nonzero(batch.lengths() + canvas > context).flatten().tolist()
    if not near:
        return list(range(batch.size)), []
    alone = [(j, batch.copy_rows([j])) for j in near]
    stay = [j for j in range(batch.size) if j not in near]
    batch.select(torch.tensor(stay, dtype=torch.long, device=batch.mask.device))
    return stay, alone


def room_left(batch: SequenceBatch, context: int) -> int:
    """Positions a one-row batch has left before `context`."""
    assert batch.size == 1, f"one row expected, got {batch.size}"
    return context - int(batch.lengths()[0])


def denoise_and_retire(batch: SequenceBatch, live: list[Row], params: BlockParams) -> Steps[tuple[torch.Tensor, list[int]]]:
    """Denoise one canvas for every row, count it, hand the rows their tokens (a generator: one
    step per denoising pass). Returns the canvas (B, C) and the indices of the rows that stay."""
    began = time.time_ns()
    canvas, steps, _ = yield from denoise_canvas_steps(batch, [r.generator for r in live], params)  # (B, C), (B,)
    ended = time.time_ns()
    for j, row in enumerate(live):
        row.stats.decoder_calls += int(steps[j])
        row.stats.steps_per_canvas.append(int(steps[j]))
        row.stats.canvas_times_ns.append((began, ended))
    return canvas, retire(live, canvas.tolist())


@torch.inference_mode()
def block_steps(rows: list[Row], params: BlockParams, ctx: LoopContext) -> Steps[None]:
    """Decode `rows` (and the newcomers `ctx` admits, at canvas boundaries) in block mode, one step at
    a time (engines.decode.loop): a denoising pass, a commit, a prefill."""
    model = ctx.model
    context = context_length(model)
    batch, _ = prefill(model, rows, ctx.pad_id, logits="none")
    yield
    live = list(rows)
    while True:
        stay, alone = split_near_the_end(batch, params.canvas, context)
        for j, own in alone:
            # Its last canvas, sized down to the positions it has left: validate() let in only
            # prompt + max_new_tokens <= context, so that room holds every token it still needs.
            row = live[j]
            yield from denoise_and_retire(own, [row], replace(params, canvas=room_left(own, context)))
            assert row.leaving, f"a last canvas left {row.request.max_new_tokens - len(row.output)} tokens to write"
        live = [live[j] for j in stay]
        keep = []
        if live:
            canvas, keep = yield from denoise_and_retire(batch, live, params)
        if keep:
            keep_t = torch.tensor(keep, device=model.device)
            batch.select(keep_t)
            live = [live[j] for j in keep]
            batch.encode(canvas[keep_t], logits="none")  # commit: the canvas becomes context for the next
            for row in live:
                row.stats.encoder_calls += 1
            yield
        joining = yield from ctx.newcomers(len(keep), logits="none")
        if joining:
            batch, live, _ = joining.merged(batch, live if keep else [])
        if not keep and not joining:
            return
