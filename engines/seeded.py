"""Skeleton-seeded block mode: denoise only the value slots of a structured answer's canvas.

A row whose request carries a `skeleton` (an `engines.skeleton.Template`) gets one canvas laid out
by `CanvasLayout`: the skeleton's tokens are fixed at every step (their logits are one-hot, so the
sampler accepts them at once and self-conditioning sees them as certain), each slot's logits are
limited to the tokens its kind may write (a string slot never writes a quote, an integer slot
only digits and '-') plus the filler, and an enum slot takes, at every step, the choice its
logits score highest. The stop rule is the library's, with the mean entropy taken over the slots
only (fixed positions have none and would make any canvas look confident).

After the canvas: the answer is read back, a slot whose value filled it is widened (`widen`) and
the canvas denoised again, and the answer is checked token by token by the row's grammar. What
the grammar refuses (or a value past `MAX_CAPACITY`) is finished by constrained AR from the
longest accepted prefix, on the same engine: the answer always follows the grammar.
"""

from __future__ import annotations

import time

import torch

from engines.batch import prefill
from engines.canvas import StopFlags
from engines.logits import sample_tokens, self_conditioning_embeddings, token_entropy
from engines.rows import Row
from engines.sampling import RowSeededEntropyBoundSampler, StableAndConfident, active_rows, schedule_temperature
from engines.skeleton import MAX_CAPACITY, CanvasLayout, Fixed, SlotSpan

KINDS = ("fixed", "string", "integer", "number", "enum", "json")
MAX_CANVASES = 3  # denoising attempts per answer (the first and two widenings) before AR finishes it
_NUMERIC = {"integer": set("-0123456789"), "number": set("-+.eE0123456789")}


def slot_vocab(texts: list[str], special: set[int], filler: int, vocab_size: int) -> torch.Tensor:
    """(len(KINDS), V) bool: the tokens each slot kind may write. `texts[t]` is what token t writes."""
    allowed = torch.zeros(len(KINDS), vocab_size, dtype=torch.bool)
    for t, text in enumerate(texts):
        if t in special or not text:
            continue
        plain = all(ch >= " " for ch in text)
        allowed[KINDS.index("string"), t] = plain and '"' not in text and "\\" not in text
        for kind, chars in _NUMERIC.items():
            allowed[KINDS.index(kind), t] = all(ch in chars for ch in text)
        allowed[KINDS.index("json"), t] = True
    allowed[:, filler] = True
    allowed[KINDS.index("fixed")] = False  # fixed positions take their skeleton token, set apart
    return allowed


class Seeding:
    """The fixed tokens and slot rules of a batch of seeded canvases (B, C), one layout per row."""

    def __init__(self, layouts: list[CanvasLayout], allowed: torch.Tensor, device: torch.device):
        self.layouts = layouts
        self.tokens = torch.tensor([lay.tokens for lay in layouts], device=device)  # (B, C)
        self.fixed = torch.tensor([lay.fixed for lay in layouts], device=device)  # (B, C)
        kinds = torch.zeros(self.tokens.shape, dtype=torch.long)
        for j, lay in enumerate(layouts):
            for span in lay.spans:
                kinds[j, span.start : span.end] = KINDS.index(span.slot.kind)
        self.kinds = kinds.to(device)
        self.allowed = allowed.to(device)
        # Each row's slot positions, in canvas order, padded with its last (fixed) position: sampling
        # and acceptance run over these only, and each row draws noise for exactly its own slots,
        # so a request gets the same tokens alone or batched.
        self.lengths = [sum(span.capacity for span in lay.spans) for lay in layouts]
        S = max(1, max(self.lengths))
        index = torch.zeros(len(layouts), S, dtype=torch.long)
        for j, lay in enumerate(layouts):
            positions = [i for span in lay.spans for i in range(span.start, span.end)]
            index[j] = torch.tensor(positions + [lay.length - 1] * (S - len(positions)))
        self.index = index.to(device)  # (B, S)
        self.slot_positions = torch.tensor(self.lengths, device=device).clamp(min=1)  # (B,)

    def constrain_(self, logits: torch.Tensor) -> torch.Tensor:
        """Slot rules on the decoder's logits (B, C, V), in place, row by row: tokens a slot may not
        write get -inf; fixed and enum positions become one-hot (0 on their token, -inf elsewhere)."""
        V = logits.shape[-1]
        tokens = self.tokens.clone()
        one_hot = self.fixed.clone()
        for j, lay in enumerate(self.layouts):
            logits[j].masked_fill_(~self.allowed[:, :V][self.kinds[j]], float("-inf"))  # (C, V) rule for row j
            for span in lay.spans:
                if span.slot.kind == "enum":
                    tokens[j, span.start : span.end] = torch.tensor(best_choice(span, logits[j], lay.filler), device=tokens.device)
                    one_hot[j, span.start : span.end] = True
        rows, positions = torch.nonzero(one_hot, as_tuple=True)
        logits[rows, positions] = float("-inf")
        logits[rows, positions, tokens[rows, positions]] = 0.0
        self.step_tokens, self.step_fixed = tokens, one_hot
        return logits

    def clamp(self, canvas: torch.Tensor) -> torch.Tensor:
        """`canvas` (B, C) with the fixed (and this step's enum) tokens in place."""
        tokens, fixed = (self.step_tokens, self.step_fixed) if hasattr(self, "step_tokens") else (self.tokens, self.fixed)
        return torch.where(fixed, tokens, canvas)


def best_choice(span: SlotSpan, logits: torch.Tensor, filler: int) -> list[int]:
    """The enum choice (its tokens, then filler to the slot's end) the step's logits (C, V) score highest."""
    logp = torch.log_softmax(logits[span.start : span.end].float(), dim=-1)  # (capacity, V)
    best, best_score = None, float("-inf")
    for choice in span.choices:
        padded = choice + [filler] * (span.capacity - len(choice))
        # a position the slot rule masked is -inf; a choice is never impossible, so clip
        score = float(logp.gather(-1, torch.tensor(padded, device=logp.device)[:, None]).clamp(min=-1e4).sum())
        if score > best_score:
            best, best_score = padded, score
    return best


class SlotSampler(RowSeededEntropyBoundSampler):
    """The row-seeded entropy-bound sampler over each row's slot positions (B, S): row b draws
    noise and samples for its first `lengths[b]` positions only, whatever else shares the batch."""

    def __init__(self, entropy_bound: float, lengths: list[int], width: int, vocab_size: int, generators: list[torch.Generator]):
        super().__init__(entropy_bound, width, vocab_size, generators)
        self.lengths = lengths

    def initialize_canvas(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        canvas = torch.zeros(batch_size, self.canvas_length, dtype=torch.long, device=device)
        for b in active_rows(self.active):
            canvas[b, : self.lengths[b]] = torch.randint(0, self.vocab_size, (self.lengths[b],), generator=self.generators[b], device=device)
        return canvas


@torch.inference_mode()
def denoise_seeded(batch, generators: list[torch.Generator], params, seeding: Seeding) -> tuple[torch.Tensor, torch.Tensor]:
    """`engines.block.denoise_canvas` for seeded canvases: the decoder sees the whole canvas, while
    sampling, acceptance, renoising and the stop rule run over the slot positions (B, S) only,
    the skeleton being fixed. Each row's slot logits (S, V) are taken one row at a time, so the
    step's logits stay its only (B, C, V) tensor. The stop rule's mean entropy is over slot
    positions only (fixed positions have none and would make any canvas look confident).
    Returns the argmax canvas (B, C) and the steps each row took (B,)."""
    B, C = seeding.tokens.shape
    S, device = seeding.index.shape[1], seeding.tokens.device
    vocab = batch.model.config.text_config.vocab_size
    sampler = SlotSampler(params.entropy_bound, seeding.lengths, S, vocab, generators)
    stop = StableAndConfident(params.stability_threshold, params.confidence_threshold)

    def full(slots: torch.Tensor) -> torch.Tensor:  # (B, S) slot tokens -> (B, C) canvas, skeleton in place
        return seeding.clamp(seeding.tokens.scatter(1, seeding.index, slots))

    inputs = batch.canvas_inputs(C)
    current = sampler.initialize_canvas(B, device)  # (B, S) uniform noise in the slots
    argmax = current
    self_conditioning = None  # (B, C, H)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    steps = torch.zeros(B, dtype=torch.long, device=device)
    flags = StopFlags(B, params.check_every)
    for step, remaining in enumerate(reversed(range(1, params.steps + 1))):
        steps += ~done
        sampler.active = flags.running
        logits = seeding.constrain_(batch.denoise(full(current), self_conditioning, inputs))  # (B, C, V)
        logits.div_(schedule_temperature(params.t_min, params.t_max, params.steps, remaining))
        sampled = torch.zeros(B, S, dtype=torch.long, device=device)
        new_argmax = torch.zeros(B, S, dtype=torch.long, device=device)
        entropy = torch.zeros(B, S, dtype=logits.dtype, device=device)
        for b in range(B):
            slot_logits = logits[b, :, :vocab].index_select(0, seeding.index[b])  # (S, V): row b's slots
            n = seeding.lengths[b]
            if n and flags.running[b]:  # a row draws for its own slots only, as it would alone
                sampled[b, :n] = sample_tokens(slot_logits[:n], generators[b])
            new_argmax[b] = slot_logits.argmax(-1)
            entropy[b] = token_entropy(slot_logits)
        accepted = sampler.accept_by_entropy(current, sampled, entropy)
        new_current = sampler.renoise_canvas(accepted, remaining)
        conditioning = self_conditioning_embeddings(batch.model, logits)  # (B, C, H)
        del logits
        if step > 0:  # rows that already stopped keep their canvas and self-conditioning
            new_argmax = torch.where(done[:, None], argmax, new_argmax)
            new_current = torch.where(done[:, None], current, new_current)
            conditioning = torch.where(done[:, None, None], self_conditioning, conditioning)
        slot_entropy = entropy.masked_fill(seeding.step_fixed.gather(1, seeding.index), 0.0)  # enum slots and padding: one-hot
        done |= stop(new_argmax, slot_entropy.sum(-1) / seeding.slot_positions)
        argmax, current, self_conditioning = new_argmax, new_current, conditioning
        if flags.read(done, step, remaining) and flags.all_stopped:
            break
    return full(argmax), steps


# --------------------------------------------------------------------------------------------
# decoding


def grammar_prefix(row: Row, tokens: list[int]) -> int:
    """How many leading `tokens` the row's grammar accepts."""
    return len(tokens) if row.constraint is None else row.constraint.accepts(tokens)


class Seeder:
    """Lays out and denoises seeded canvases for one engine (its tokenizer, filler and slot vocabularies)."""

    def __init__(self, tokenizer, filler: int, allowed: torch.Tensor):
        self.tokenizer = tokenizer
        self.filler = filler
        self.allowed = allowed  # (len(KINDS), V) from slot_vocab

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def layouts(self, rows: list[Row], widen: list[dict[str, int]]) -> list[CanvasLayout]:
        """One layout per row, all padded to the longest."""
        size = max(CanvasLayout.build(r.request.skeleton, self.encode, self.filler, w).length for r, w in zip(rows, widen))
        return [CanvasLayout.build(r.request.skeleton, self.encode, self.filler, w, size) for r, w in zip(rows, widen)]

    def denoise(self, batch, rows: list[Row], layouts: list[CanvasLayout], params) -> tuple[list[list[int]], list[list[str]], torch.Tensor]:
        """Denoise one seeded canvas per row after the batch's cached tokens, and count it.
        Returns each row's answer tokens, the slots that overflowed, and the steps (B,)."""
        seeding = Seeding(layouts, self.allowed, batch.mask.device)
        began = time.time_ns()
        canvas, steps = denoise_seeded(batch, [r.generator for r in rows], params, seeding)
        ended = time.time_ns()
        answers, overflowed = [], []
        for i, row in enumerate(rows):
            row.stats.decoder_calls += int(steps[i])
            row.stats.steps_per_canvas.append(int(steps[i]))
            row.stats.canvas_times_ns.append((began, ended))
            answer, over = layouts[i].read(canvas[i].tolist())
            answers.append(answer)
            overflowed.append(over)
        return answers, overflowed, steps

    def drafts(self, batch, rows: list[Row], params) -> tuple[torch.Tensor, torch.Tensor]:
        """Verified mode's first drafts: each row's seeded answer, then filler, as one (B, C) tensor."""
        answers, _, steps = self.denoise(batch, rows, self.layouts(rows, [{} for _ in rows]), params)
        width = max(len(a) for a in answers) + 1
        draft = torch.full((len(rows), width), self.filler, dtype=torch.long, device=batch.mask.device)
        for i, answer in enumerate(answers):
            draft[i, : len(answer)] = torch.tensor(answer, dtype=torch.long)
        return draft, steps


def starts_skeleton(row: Row, logits: torch.Tensor, seeder: Seeder) -> bool:
    """Whether the row's first AR choice (greedy, under its grammar) from the prefill's logits (V,)
    is the skeleton's first token."""
    first = row.request.skeleton[0]
    if not isinstance(first, Fixed):
        return True
    if row.constraint is not None:
        logits = row.constraint.mask_(logits.clone())
    return int(logits.argmax()) == seeder.encode(first.text)[0]


@torch.inference_mode()
def decode_seeded(model, rows: list[Row], params, pad_id: int, seeder: Seeder) -> list[Row]:
    """Decode `rows` (block mode, each with a skeleton) by seeded canvases and close those that
    finish. Returns the rest (a value the grammar refused, or one too long for its slot) with
    their accepted prefix committed: the caller finishes them with constrained AR."""
    unfinished: list[Row] = []
    batch, logits = prefill(model, rows, pad_id, logits="last")  # (B, V)
    context = model.config.text_config.max_position_embeddings
    too_long = lambda r: (seeder.layouts([r], [{}])[0].length > model.config.canvas_length  # noqa: E731
                          or len(r.prompt_ids) + seeder.layouts([r], [{}])[0].length > context)
    # AR writes the answer when the model does not begin the skeleton (a text answer instead of a
    # call), or when the skeleton's canvas is longer than the model's canvas or the context left
    optional = [j for j, r in enumerate(rows) if (r.request.skeleton_optional and not starts_skeleton(r, logits[j], seeder)) or too_long(r)]
    if optional:
        unfinished += [rows[j] for j in optional]
        for j in optional:
            rows[j].stats.seeded_fallback = True
        keep = [j for j in range(len(rows)) if j not in optional]
        if not keep:
            return unfinished
        batch.select(torch.tensor(keep, device=model.device))
        rows = [rows[j] for j in keep]
    widen: list[dict[str, int]] = [{} for _ in rows]
    live = list(range(len(rows)))
    for attempt in range(MAX_CANVASES):
        layouts = seeder.layouts([rows[j] for j in live], [widen[j] for j in live])
        answers, overflows, _ = seeder.denoise(batch, [rows[j] for j in live], layouts, params)
        again = []
        for i, j in enumerate(live):
            row, answer, overflowed = rows[j], answers[i], overflows[i]
            capacity = {s.slot.path: s.capacity for s in layouts[i].spans}
            grown = {p: min(MAX_CAPACITY, 2 * capacity[p]) for p in overflowed}
            if attempt + 1 < MAX_CANVASES and not row.cancelled and any(grown[p] > capacity[p] for p in grown):
                widen[j].update(grown)  # a value filled its slot: denoise again with the slot wider
                again.append(i)
                continue
            if not row.cancelled:
                ok = grammar_prefix(row, answer)
                if row.constraint is not None:  # no more than leaves room to end by max_new_tokens (AR finishes the rest)
                    ok = row.constraint.room_prefix(answer[:ok])
                row.extend(answer[:ok])
                if ok == len(answer) and not overflowed and not row.finished and (row.constraint is None or row.constraint.accepting):
                    row.extend([seeder.filler])  # the skeleton is complete (a grammar may allow more, e.g. parallel calls: one is the answer)
            if row.leaving:
                row.close()
            else:
                row.stats.seeded_fallback = True
                unfinished.append(row)
        if not again:
            break
        batch.select(torch.tensor(again, device=model.device))
        live = [live[i] for i in again]
    return unfinished
