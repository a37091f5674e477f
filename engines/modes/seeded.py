"""Skeleton-seeded block mode: denoise only the value slots of a structured answer's canvas.

A row whose request carries a `skeleton` (an `engines.skeleton.Template`) gets one canvas laid out
by `CanvasLayout`: the skeleton's tokens are fixed at every step (their logits are one-hot, so the
sampler accepts them at once and self-conditioning sees them as certain), each slot's logits are
limited to the tokens its kind may write (a string slot never writes a quote, an integer slot
only digits and '-') plus the filler, and an enum slot takes, at every step, the choice its
logits score highest. A token that would end the value in plain JSON (a string slot's closing
quote, `",`; a number's `,` or `}`) says what the filler says, so its probability is the filler's
too: a model that writes `"Sofia"` in plain JSON ends the slot's value after `Sofia`.

The steps follow the slots, not the canvas (`engines.modes.seeded_schedule`): each free slot's value grows
from its start (the next token every step, and the confident run after it), an enum slot is chosen
when it is sure, and the canvas is done when every slot is committed.

After the canvas: a slot whose value filled it is widened and denoised again on a canvas where the
other slots are fixed at their committed values (`known`), up to MAX_CANVASES canvases. The answer
is then checked by the row's grammar piece by piece, and constrained AR writes only the slots the
grammar refuses (or a value still cut at its widest), each from its longest accepted prefix, the
skeleton and the other slots following (`engines.modes.seeded_ar`): the answer always follows the grammar.
"""

from __future__ import annotations

import time

import torch

from engines.batch.prefill import prefill
from engines.decode.rows import Row
from engines.skeleton import MAX_CAPACITY, Fixed
from engines.modes.seeded_layout import CanvasLayout, SlotSpan
from engines.modes.seeded_ar import finish_slots, start_answer
from engines.modes.seeded_denoise import denoise_seeded
from engines.modes.seeded_schedule import OpenSlot

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
    """The fixed tokens and slot rules of a batch of seeded canvases (B, C), one layout per row."""

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
            for span in lay.spans:  # before the slot rule, which leaves an enum position only the filler
                if span.slot.kind == "enum" and not span.known:
                    choice, uncertainty = best_choice(span, logits[j], lay.filler)
                    tokens[j, span.start : span.end] = torch.tensor(choice, device=tokens.device)
                    one_hot[j, span.start : span.end] = True
                    self.choice_uncertainty[j][span.start] = uncertainty
            logits[j].masked_fill_(~self.allowed[:, :V][self.kinds[j]], float("-inf"))  # (C, V) rule for row j
        rows, positions = torch.nonzero(one_hot, as_tuple=True)
        logits[rows, positions] = float("-inf")
        logits[rows, positions, tokens[rows, positions]] = 0.0
        self.step_tokens = tokens
        return logits

    def full(self, slots: torch.Tensor) -> torch.Tensor:
        """(B, S) slot tokens -> the (B, C) canvas, the skeleton (and known slots) in place."""
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


# --------------------------------------------------------------------------------------------
# decoding


class Seeder:
    """Lays out and denoises seeded canvases for one engine (its tokenizer, filler and slot vocabularies)."""

    def __init__(self, tokenizer, filler: int, texts: list[str], vocab_size: int):
        self.tokenizer = tokenizer
        self.filler = filler
        self.texts = texts  # what each token writes (engines.grammar.constraint.GrammarTokenizer.texts)
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

    def denoise(self, batch, rows: list[Row], widen: list[dict[str, int]], known: list[dict[str, list[int]]], params
                ) -> tuple[list[CanvasLayout], list[list[int]], list[set[str]], torch.Tensor]:
        """Denoise one seeded canvas per row after the batch's cached tokens, and count it. `widen`
        and `known` are each row's wider slots and slots given (`CanvasLayout.build`). Returns each
        row's last layout (every slot known), its canvas, the paths of the slots whose value filled
        them, and the steps (B,)."""
        layouts = self.layouts(rows, widen, known)
        size = len(layouts[0].tokens)
        relayout = lambda b, given: CanvasLayout.build(rows[b].request.skeleton, self.encode, self.filler, widen[b], size, given)  # noqa: E731
        began = time.time_ns()
        seeding, steps, overflowed = denoise_seeded(batch, [r.generator for r in rows], params,
                                                    Seeding(layouts, self.allowed, self.ends, batch.mask.device), relayout)
        ended = time.time_ns()
        for i, row in enumerate(rows):
            row.stats.decoder_calls += int(steps[i])
            row.stats.steps_per_canvas.append(int(steps[i]))
            row.stats.canvas_times_ns.append((began, ended))
        return seeding.layouts, seeding.tokens.tolist(), overflowed, steps

    def drafts(self, batch, rows: list[Row], params) -> tuple[torch.Tensor, torch.Tensor]:
        """Verified mode's first drafts: each row's seeded answer, then filler, as one (B, C) tensor."""
        layouts, canvases, _, steps = self.denoise(batch, rows, [{} for _ in rows], [{} for _ in rows], params)
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
    the slots the grammar refuses (engines.modes.seeded_ar). Returns the rows whose answer is not the
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
    final: dict[int, list] = {}  # row -> its answer's pieces (CanvasLayout.pieces)
    live = list(range(len(rows)))
    for attempt in range(MAX_CANVASES):
        layouts, canvases, overflows, _ = seeder.denoise(batch, [rows[j] for j in live], [widen[j] for j in live], [known[j] for j in live],
                                                         params)
        again = []
        for i, j in enumerate(live):
            pieces = [(s, ids, s is not None and s.slot.path in overflows[i]) for s, ids, _ in layouts[i].pieces(canvases[i])]
            capacity = {s.slot.path: s.capacity for s in seeder.layouts([rows[j]], [widen[j]])[0].spans}
            grown = {p: min(MAX_CAPACITY, 2 * capacity[p]) for p in overflows[i] if capacity[p] < MAX_CAPACITY}
            if attempt + 1 < MAX_CANVASES and not rows[j].cancelled and grown:
                # only the slots whose value filled them are denoised again, wider; the others stay as committed
                widen[j].update(grown)
                known[j] = {s.slot.path: ids for s, ids, _ in pieces if s is not None and s.slot.path not in grown}
                again.append(i)
            else:
                final[j] = pieces
        if not again:
            break
        batch.select(torch.tensor(again, device=model.device))
        live = [live[i] for i in again]
    plans = {}
    for j, row in enumerate(rows):
        if not row.cancelled:
            plan = start_answer(row, final[j], seeder)
            if plan is not None:
                plans[j] = plan
        if row.leaving:
            row.close()
    if plans:
        finish_slots(model, [rows[j] for j in plans], list(plans.values()), pad_id, seeder)
    return unfinished
