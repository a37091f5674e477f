"""Skeleton-seeded block mode: denoise only the value slots of a structured answer's canvas.

A row whose request carries a `skeleton` (an `engines.skeleton.Template`) gets one canvas laid out
by `CanvasLayout`: the skeleton's tokens are fixed at every step (their logits are one-hot, so the
sampler accepts them at once and self-conditioning sees them as certain), each slot's logits are
limited to the tokens its kind may write (a string slot never writes a quote, an integer slot
only digits and '-') plus the filler, and an enum slot takes, at every step, the choice its
logits score highest. A token that would end the value in plain JSON (a string slot's closing
quote, `",`; a number's `,` or `}`) says what the filler says, so its probability is the filler's
too: a model that writes `"Sofia"` in plain JSON ends the slot's value after `Sofia`.

The steps follow the slots, not the canvas (`engines.slot_schedule`): a step budget proportional
to the slot positions, slots committed in confidence order (a confident slot after one step), each
committed slot fixed for the steps after, the canvas done when every slot is.

After the canvas: a slot whose value filled it is widened and denoised again on a canvas where the
other slots are fixed at their committed values (`known`), up to MAX_CANVASES canvases. The answer
is then checked by the row's grammar piece by piece, and constrained AR writes only the slots the
grammar refuses (or a value still cut at its widest), each from its longest accepted prefix, the
skeleton and the other slots following (`engines.slot_ar`): the answer always follows the grammar.
"""

from __future__ import annotations

import time

import torch

from engines.batch import prefill
from engines.logits import sample_tokens, self_conditioning_embeddings, token_entropy
from engines.rows import Row
from engines.sampling import RowSeededEntropyBoundSampler, active_rows, schedule_temperature
from engines.skeleton import MAX_CAPACITY, CanvasLayout, Fixed, SlotSpan
from engines.slot_ar import finish_slots, start_answer
from engines.slot_schedule import OpenSlot, SlotSchedule, value_uncertainty

KINDS = ("fixed", "string", "integer", "number", "enum", "json")
MAX_CANVASES = 3  # denoising attempts per answer (the first and two widenings) before AR finishes a cut value
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


def value_ends(texts: list[str], special: set[int], vocab_size: int) -> torch.Tensor:
    """(len(KINDS), V) bool: the tokens that, in plain JSON, end a value of each kind where they
    begin: a string's closing quote ('"', '",', '"}'); after a number, ',' or '}' or ']'."""
    ends = torch.zeros(len(KINDS), vocab_size, dtype=torch.bool)
    for t, text in enumerate(texts[:vocab_size]):
        if t in special or not text:
            continue
        ends[KINDS.index("string"), t] = text[0] == '"'
        ends[KINDS.index("integer"), t] = ends[KINDS.index("number"), t] = text[0] in ",}]"
    return ends


class Seeding:
    """The fixed tokens and slot rules of a batch of seeded canvases (B, C), one layout per row.
    `commit` fixes a slot's tokens for the steps after."""

    def __init__(self, layouts: list[CanvasLayout], allowed: torch.Tensor, ends: torch.Tensor, device: torch.device):
        self.layouts = layouts
        self.filler = layouts[0].filler
        self.tokens = torch.tensor([lay.tokens for lay in layouts], device=device)  # (B, C)
        self.fixed = torch.tensor([lay.fixed for lay in layouts], device=device)  # (B, C)
        kinds = torch.zeros(self.tokens.shape, dtype=torch.long)
        for j, lay in enumerate(layouts):
            for span in lay.spans:
                if not span.known:
                    kinds[j, span.start : span.end] = KINDS.index(span.slot.kind)
        self.kinds = kinds.to(device)
        self.allowed = allowed.to(device)
        self.ends = ends.to(device)
        # Each row's open slot positions, in canvas order, padded with its last (fixed) position: sampling
        # and acceptance run over these only, and each row draws noise for exactly its own slots,
        # so a request gets the same tokens alone or batched.
        self.open: list[list[OpenSlot]] = []
        for lay in layouts:
            offsets, at = [], 0
            for span in lay.spans:
                if not span.known:
                    offsets.append(OpenSlot(span, at))
                    at += span.capacity
            self.open.append(offsets)
        self.lengths = [sum(o.span.capacity for o in row) for row in self.open]
        S = max(1, max(self.lengths))
        index = torch.zeros(len(layouts), S, dtype=torch.long)
        for j, lay in enumerate(layouts):
            positions = [i for o in self.open[j] for i in range(o.span.start, o.span.end)]
            index[j] = torch.tensor(positions + [lay.length - 1] * (S - len(positions)))
        self.index = index.to(device)  # (B, S)
        self.committed: list[set[int]] = [set() for _ in layouts]  # per row, the start of each committed slot
        self.choice_uncertainty: list[dict[int, float]] = [{} for _ in layouts]  # per row, enum slot start -> this step's

    def constrain_(self, logits: torch.Tensor) -> torch.Tensor:
        """Slot rules on the decoder's logits (B, C, V), in place, row by row: a token that ends the
        value adds its probability to the filler's; tokens a slot may not write get -inf; fixed and
        enum positions become one-hot (0 on their token, -inf elsewhere)."""
        V = logits.shape[-1]
        tokens = self.tokens.clone()
        one_hot = self.fixed.clone()
        for j, lay in enumerate(self.layouts):
            ending = logits[j].masked_fill(~self.ends[:, :V][self.kinds[j]], float("-inf")).logsumexp(-1)  # (C,)
            logits[j, :, self.filler] = torch.logaddexp(logits[j, :, self.filler], ending)
            logits[j].masked_fill_(~self.allowed[:, :V][self.kinds[j]], float("-inf"))  # (C, V) rule for row j
            for span in lay.spans:
                if span.slot.kind == "enum" and not span.known and span.start not in self.committed[j]:
                    choice, uncertainty = best_choice(span, logits[j], lay.filler)
                    tokens[j, span.start : span.end] = torch.tensor(choice, device=tokens.device)
                    one_hot[j, span.start : span.end] = True
                    self.choice_uncertainty[j][span.start] = uncertainty
        rows, positions = torch.nonzero(one_hot, as_tuple=True)
        logits[rows, positions] = float("-inf")
        logits[rows, positions, tokens[rows, positions]] = 0.0
        self.step_tokens = tokens
        return logits

    def commit(self, j: int, span: SlotSpan, tokens: list[int]) -> None:
        """Fix row j's slot at `span` to `tokens` (value, then filler to its end) from now on."""
        self.tokens[j, span.start : span.end] = torch.tensor(tokens, device=self.tokens.device)
        self.fixed[j, span.start : span.end] = True
        self.committed[j].add(span.start)

    def full(self, slots: torch.Tensor) -> torch.Tensor:
        """(B, S) slot tokens -> the (B, C) canvas, skeleton and committed slots in place."""
        return torch.where(self.fixed, self.tokens, self.tokens.scatter(1, self.index, slots))


def best_choice(span: SlotSpan, logits: torch.Tensor, filler: int) -> tuple[list[int], float]:
    """The enum choice (its tokens, then filler to the slot's end) the step's logits (C, V) score
    highest, and the entropy of the choices' posterior per position of that choice (nats)."""
    logp = torch.log_softmax(logits[span.start : span.end].float(), dim=-1)  # (capacity, V)
    padded = [choice + [filler] * (span.capacity - len(choice)) for choice in span.choices]
    index = torch.tensor(padded, device=logp.device)  # (choices, capacity)
    # a position the slot rule masked is -inf; a choice is never impossible, so clip
    scores = logp.gather(-1, index.T).T.clamp(min=-1e4).sum(-1)  # (choices,)
    best = int(scores.argmax())
    posterior = torch.log_softmax(scores, -1)
    entropy = float(-(posterior.exp() * posterior).sum())
    return padded[best], entropy / (len(span.choices[best]) + 1)


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
    sampling, acceptance and renoising run over the open slot positions (B, S) only, and each row
    commits its slots as `engines.slot_schedule.SlotSchedule` says, after every step (the commit
    decisions read the step's argmax and entropies on the host). A row's temperature follows the
    library's linear schedule over its own budget. Each row's slot logits (S, V) are taken one row
    at a time, so the step's logits stay its only (B, C, V) tensor. Returns the canvas (B, C), every
    slot committed, and the steps each row took (B,)."""
    B, C = seeding.tokens.shape
    S, device = seeding.index.shape[1], seeding.tokens.device
    vocab = batch.model.config.text_config.vocab_size
    sampler = SlotSampler(params.entropy_bound, seeding.lengths, S, vocab, generators)
    schedule = SlotSchedule(seeding.open, seeding.lengths, params.steps, params.confidence_threshold)
    inputs = batch.canvas_inputs(C)
    sampler.active = [not schedule.done(b) for b in range(B)]
    current = sampler.initialize_canvas(B, device)  # (B, S) uniform noise in the slots
    self_conditioning = None  # (B, C, H)
    while any(sampler.active):
        running = list(sampler.active)
        logits = seeding.constrain_(batch.denoise(seeding.full(current), self_conditioning, inputs))  # (B, C, V)
        sampled = torch.zeros(B, S, dtype=torch.long, device=device)
        argmax = torch.zeros(B, S, dtype=torch.long, device=device)
        entropy = torch.zeros(B, S, dtype=logits.dtype, device=device)
        for b in active_rows(running):
            logits[b].div_(schedule_temperature(params.t_min, params.t_max, schedule.budget[b], schedule.remaining(b)))
            slot_logits = logits[b, :, :vocab].index_select(0, seeding.index[b])  # (S, V): row b's slots
            n = seeding.lengths[b]
            sampled[b, :n] = sample_tokens(slot_logits[:n], generators[b])  # a row draws for its own slots only, as it would alone
            argmax[b] = slot_logits.argmax(-1)
            entropy[b] = token_entropy(slot_logits)
        accepted = sampler.accept_by_entropy(current, sampled, entropy)
        new_current = sampler.renoise_canvas(accepted, 0)
        conditioning = self_conditioning_embeddings(batch.model, logits)  # (B, C, H)
        del logits
        if self_conditioning is not None:  # rows already done keep their canvas and self-conditioning
            held = torch.tensor([not r for r in running], device=device)
            new_current = torch.where(held[:, None], current, new_current)
            conditioning = torch.where(held[:, None, None], self_conditioning, conditioning)
        current, self_conditioning = new_current, conditioning
        top, ent = argmax.tolist(), entropy.tolist()  # the step's one host read: what each row commits
        for b in active_rows(running):
            uncertainty = []
            for o in schedule.open[b]:
                if o.span.slot.kind == "enum":
                    uncertainty.append(seeding.choice_uncertainty[b][o.span.start])
                else:
                    window = slice(o.offset, o.offset + o.span.capacity)
                    uncertainty.append(value_uncertainty(top[b][window], ent[b][window], seeding.filler))
            for o in schedule.commit(b, uncertainty):
                if o.span.slot.kind == "enum":
                    tokens = seeding.step_tokens[b, o.span.start : o.span.end].tolist()
                else:
                    value = top[b][o.offset : o.offset + o.span.capacity]
                    value = value[: value.index(seeding.filler)] if seeding.filler in value else value
                    tokens = value + [seeding.filler] * (o.span.capacity - len(value))
                seeding.commit(b, o.span, tokens)
        sampler.active = [not schedule.done(b) for b in range(B)]
    return seeding.tokens.clone(), torch.tensor(schedule.steps, device=device)


# --------------------------------------------------------------------------------------------
# decoding


class Seeder:
    """Lays out and denoises seeded canvases for one engine (its tokenizer, filler and slot vocabularies)."""

    def __init__(self, tokenizer, filler: int, texts: list[str], vocab_size: int):
        self.tokenizer = tokenizer
        self.filler = filler
        self.texts = texts  # what each token writes (engines.constraint.GrammarTokenizer.texts)
        special = set(tokenizer.all_special_ids)
        self.allowed = slot_vocab(texts, special, filler, vocab_size)  # (len(KINDS), V)
        self.ends = value_ends(texts, special, vocab_size)  # (len(KINDS), V)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def layouts(self, rows: list[Row], widen: list[dict[str, int]], known: list[dict[str, list[int]]] | None = None) -> list[CanvasLayout]:
        """One layout per row, all padded to the longest."""
        known = known or [{} for _ in rows]
        size = max(CanvasLayout.build(r.request.skeleton, self.encode, self.filler, w, None, k).length for r, w, k in zip(rows, widen, known))
        return [CanvasLayout.build(r.request.skeleton, self.encode, self.filler, w, size, k) for r, w, k in zip(rows, widen, known)]

    def denoise(self, batch, rows: list[Row], layouts: list[CanvasLayout], params) -> tuple[list[list[int]], torch.Tensor]:
        """Denoise one seeded canvas per row after the batch's cached tokens, and count it.
        Returns each row's canvas (every slot committed) and the steps (B,)."""
        seeding = Seeding(layouts, self.allowed, self.ends, batch.mask.device)
        began = time.time_ns()
        canvas, steps = denoise_seeded(batch, [r.generator for r in rows], params, seeding)
        ended = time.time_ns()
        for i, row in enumerate(rows):
            row.stats.decoder_calls += int(steps[i])
            row.stats.steps_per_canvas.append(int(steps[i]))
            row.stats.canvas_times_ns.append((began, ended))
        return canvas.tolist(), steps

    def drafts(self, batch, rows: list[Row], params) -> tuple[torch.Tensor, torch.Tensor]:
        """Verified mode's first drafts: each row's seeded answer, then filler, as one (B, C) tensor."""
        layouts = self.layouts(rows, [{} for _ in rows])
        canvases, steps = self.denoise(batch, rows, layouts, params)
        answers = [layout.read(canvas)[0] for layout, canvas in zip(layouts, canvases)]
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
    """Decode `rows` (block mode, each with a skeleton) by seeded canvases; constrained AR writes only
    the slots the grammar refuses (engines.slot_ar). Returns the rows whose answer is not the
    skeleton's at all (a text answer where the skeleton was optional, or a skeleton longer than the
    canvas or the context left): the caller writes them with constrained AR."""
    unfinished: list[Row] = []
    for r in rows:
        r.stats.slot_tokens_block = r.stats.slot_tokens_ar = 0
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
            rows[j].stats.slot_tokens_block = rows[j].stats.slot_tokens_ar = None  # no canvas: not a seeded answer
        keep = [j for j in range(len(rows)) if j not in optional]
        if not keep:
            return unfinished
        batch.select(torch.tensor(keep, device=model.device))
        rows = [rows[j] for j in keep]
    widen: list[dict[str, int]] = [{} for _ in rows]
    known: list[dict[str, list[int]]] = [{} for _ in rows]
    final: dict[int, tuple[CanvasLayout, list]] = {}
    live = list(range(len(rows)))
    for attempt in range(MAX_CANVASES):
        layouts = seeder.layouts([rows[j] for j in live], [widen[j] for j in live], [known[j] for j in live])
        canvases, _ = seeder.denoise(batch, [rows[j] for j in live], layouts, params)
        again = []
        for i, j in enumerate(live):
            pieces = layouts[i].pieces(canvases[i])
            grown = {s.slot.path: min(MAX_CAPACITY, 2 * s.capacity) for s, _, full in pieces if s is not None and full and not s.known}
            grown = {p: c for p, c in grown.items() if c > next(s.capacity for s in layouts[i].spans if s.slot.path == p)}
            if attempt + 1 < MAX_CANVASES and not rows[j].cancelled and grown:
                # only the slots whose value filled them are denoised again, wider; the others stay as committed
                widen[j].update(grown)
                known[j] = {s.slot.path: canvases[i][s.start : s.end] for s in layouts[i].spans if s.slot.path not in grown}
                again.append(i)
            else:
                final[j] = (layouts[i], pieces)
        if not again:
            break
        batch.select(torch.tensor(again, device=model.device))
        live = [live[i] for i in again]
    plans = {}
    for j, row in enumerate(rows):
        if not row.cancelled:
            plan = start_answer(row, final[j][1], seeder)
            if plan is not None:
                plans[j] = plan
        if row.leaving:
            row.close()
    if plans:
        finish_slots(model, [rows[j] for j in plans], list(plans.values()), pad_id, seeder)
    return unfinished
