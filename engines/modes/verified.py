"""Verified mode: diffusion drafts, checked token by token against the model's own AR choice.

A round, for context x_1..x_n whose last encoder pass predicted `next` for position n+1:
1. draft a canvas d_1..d_C in block mode (greedy: each position's most likely token);
2. commit pass: the encoder over the draft yields the AR choice a_i after every d_i;
3. accept the longest prefix with d_1 == next and d_i == a_{i-1}; append the AR token at
   the first mismatch (or a_C as a bonus when all match);
4. encode that AR token with the rest of the draft past it, keeping the rest's prefix that AR's
   choices agree with (`check_rests`); the pass predicts `next` for the following round.
Every output token is the AR choice given the tokens before it, so under greedy decoding the
output equals AR mode token for token; with sampling it is distributed exactly as AR sampling.
A row with a grammar takes its AR choices under the grammar's mask, walking the draft position by
position with the matcher (`engines.modes.verified_choices`), so it equals constrained AR mode the same way.
The accepted draft tokens' KV from the commit pass is kept; rejected slots are cropped (or,
where rows accepted different counts, masked).

Drafts adapt per row: `engines.modes.verified_drafting.DraftControl` plans each row's next draft (canvas, steps)
from the credit its rounds earned, priced in AR steps by `engines.modes.verified_drafting.DraftCosts`; a row
with no credit, or whose next token AR is unsure of (`predict`), writes by plain AR steps inside
the same request.

Rows that draft and rows that write by AR steps decode as two batches (`Rows`; `regroup` moves a
row between them when its plan changes: engines.modes.verified_batches): after a draft round every row
takes STEP_SHARE times its cost in AR steps together, so the rows that do not draft keep most of
AR's speed. A row whose next draft would run past the context drafts only what fits, or goes on by
AR steps: no position past the context is ever used, and prompt + `max_new_tokens` up to the
context fit, as in AR.
"""

from __future__ import annotations

import time

import torch

from engines.modes.ar import ar_steps, next_tokens
from engines.modes.verified_choices import ar_choices
from engines.batch.sequence_batch import SequenceBatch
from engines.batch.prefill import prefill
from engines.modes.block import denoise_canvas
from engines.decode.canvas_settings import BlockParams, context_length
from engines.modes.verified_draft_tokens import answer_span, draft_end, draft_rest
from engines.modes.verified_drafting import ABANDON_ENTROPY, SURE_ENTROPY, DraftControl, DraftCosts
from engines.model.logits import token_entropy
from engines.modes.ar_lookup import ar_pass, encode_checked
from engines.decode.loop import LoopContext
from engines.decode.rows import Row, retire
from engines.modes.verified_batches import Rows, regroup
from engines.decode.steps import Steps

AR_STRETCH = 16  # AR steps between looks at the plans (and the newcomers) while no row drafts
# After a draft round, while other rows of the batch write by AR steps, every row takes this many
# times the round's cost in AR steps together: a draft round stops the rows that do not draft,
# so they get at least STEP_SHARE / (STEP_SHARE + 1) of the machine, and a row in a batch with
# drafting rows is at most ~1.25x slower than in AR mode. Drafting rows still gain what their
# accepted drafts write; a batch where every row drafts never waits.
STEP_SHARE = 4.0

def predict(rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
    """Each row's AR choice for its next position from last-position logits (B, V) -> (B,),
    noting in its plan whether AR is sure of that token (a draft waits where it is not, and
    after a stop token there is nothing to draft). A row with a grammar counts as sure where it
    goes on: what the grammar allows, not the raw logits, decides there."""
    tokens = next_tokens(rows, logits[:, None])[:, 0]
    for row, e, token in zip(rows, token_entropy(logits).tolist(), tokens.tolist()):
        if row.draft is not None:
            row.draft.next_token(sure=token not in row.stop_ids and (row.constraint is not None or e < row.draft.sure_below))
    return tokens


def draft_canvas(batch: SequenceBatch, rows: list[Row], params: BlockParams) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The drafter: block mode's denoiser, greedy, dropping drafts that start unsure.
    Returns (draft (B, C), steps (B,), abandoned (B,))."""
    return denoise_canvas(batch, [r.draft.noise for r in rows], params, greedy=True, abandon_above=ABANDON_ENTROPY)


def verify_round(rows: Rows, params: BlockParams, seeder=None, costs: DraftCosts | None = None) -> float:
    """One round for every live row: draft, commit pass, accept, correct. Updates `rows` in place
    and each row's `DraftControl` (when `costs` is given). Returns the round's cost in AR steps.
    With a `seeder` (engines.modes.seeded.Seeder) the drafts are the rows' skeleton-seeded answers."""
    batch, live, device = rows.batch, rows.live, rows.batch.mask.device
    began = time.time_ns()
    if seeder is not None:
        draft, steps = seeder.drafts(batch, live, params)  # (B, C)
    else:
        draft, steps, abandoned = draft_canvas(batch, live, params)  # (B, C), (B,), (B,)
        # A draft is accepted from its first token on, and that token must be AR's choice, known
        # already (`rows.predicted`): where no row's draft starts with it, the verify pass would
        # accept nothing, and the round ends as an AR step without it.
        missed = draft[:, 0] != rows.predicted  # (B,)
        if costs is not None and bool((abandoned | missed).all()):
            return drop_drafts(rows, draft.shape[1], steps, costs, began)
    draft = draft[:, : answer_span(live, draft)]  # nothing after every row's stop token is ever committed
    start = batch.slots
    commit_logits = batch.encode(draft, logits="all")  # (B, C, V): AR choice after each draft token
    ar = torch.cat([rows.predicted[:, None], ar_choices(live, draft, commit_logits, rows.predicted)], dim=1)  # (B, C + 1)
    agree = (draft == ar[:, :-1]).long().cumprod(-1)  # (B, C) 1 up to the first mismatch
    accepted = agree.sum(-1)  # (B,)
    ended = time.time_ns()
    committed, rests = [], []
    for j, row in enumerate(live):
        k = int(accepted[j])
        if seeder is None:  # the seeder counted its canvas
            row.stats.decoder_calls += int(steps[j])
            row.stats.steps_per_canvas.append(int(steps[j]))
            row.stats.canvas_times_ns.append((began, ended))
        row.stats.encoder_calls += 1
        committed.append(draft[j, :k].tolist() + [int(ar[j, k])])
        rests.append(draft_rest(row, draft[j].tolist(), k))
    before = [len(row.output) for row in live]
    keep = retire(live, committed)
    for j, row in enumerate(live):  # count what the row used: a draft past the answer's end is not
        used, k = len(row.output) - before[j], int(accepted[j])
        row.stats.drafted += min(draft.shape[1], used) if row.leaving else draft.shape[1]
        row.stats.accepted += min(k, used)
        row.stats.ar_tokens += used - min(k, used)
    # Keep the KV of accepted draft tokens only; the AR token at the mismatch is encoded next.
    longest = int(accepted.max())
    batch.keep_slots(start + longest)
    batch.invalidate(torch.arange(longest, device=device)[None] < accepted[:, None], start)
    rows.live = [live[j] for j in keep]
    tails = torch.zeros(len(live), dtype=torch.long, device=device)
    if keep:
        keep_t = torch.tensor(keep, device=device)
        batch.select(keep_t)
        tails[keep_t] = check_rests(rows, ar[keep_t, accepted[keep_t]], [rests[j] for j in keep])
    else:
        rows.predicted = rows.predicted[:0]
    spent = 0.0
    for j, row in enumerate(live):
        if costs is not None and row.draft is not None:
            k = int(accepted[j] + tails[j])  # the draft's tokens the round wrote, its rest's included
            cost = costs.round(draft.shape[1], int(steps[j]), len(live))
            row.draft.drafted(k, draft.shape[1], cost, draft_end(row, draft[j].tolist(), k))
            spent = max(spent, cost)
    return spent


def check_rests(rows: Rows, corrections: torch.Tensor, rests: list[list[int] | None]) -> torch.Tensor:
    """Encode each row's AR token from the round (`corrections`, (B,)) with the rest of its draft and
    commit the rest's prefix AR agrees with, in the pass that encodes the AR token anyway
    (`engines.modes.ar_lookup.encode_checked`; a batch with a row that may not check, None, checks none). Sets
    `rows.predicted`; returns the rest's tokens each row committed (B,)."""
    live = rows.live
    usable = [r or [] for r in rests] if all(r is not None for r in rests) else [[] for _ in rests]
    before = [len(row.output) for row in live]
    last, keep, agreed = encode_checked(rows.batch, live, corrections, usable)
    for j, row in enumerate(live):
        row.stats.encoder_calls += 1
        row.stats.accepted += len(row.output) - before[j]
    rows.live = [live[j] for j in keep]
    rows.predicted = predict(rows.live, last) if keep else rows.predicted[:0]
    return torch.tensor(agreed, dtype=torch.long, device=corrections.device)


def drop_drafts(rows: Rows, canvas: int, steps: torch.Tensor, costs: DraftCosts, began: int) -> float:
    """Every row's draft (of `canvas` tokens) was abandoned at its first step or does not start
    with AR's choice: no verify pass, the round ends as an AR step. Returns the round's cost, in AR steps."""
    spent = 0.0
    for j, row in enumerate(rows.live):
        row.stats.decoder_calls += int(steps[j])
        row.stats.steps_per_canvas.append(int(steps[j]))
        row.stats.canvas_times_ns.append((began, time.time_ns()))
        cost = int(steps[j]) * costs.step(canvas, len(rows.live))
        row.draft.abandoned(cost)
        spent = max(spent, cost)
    ar_step(rows)
    return spent + 1.0


def ar_step(rows: Rows) -> None:
    """Every live row commits its predicted token (the AR choice) and encodes it: one AR step, with
    prompt-lookup guesses where they pay and `rows.lookup` (`engines.modes.ar_lookup`)."""
    before = [len(row.output) for row in rows.live]
    keep = retire(rows.live, [[int(t)] for t in rows.predicted])
    for j, row in enumerate(rows.live):
        row.stats.ar_tokens += len(row.output) - before[j]
    for j in keep:
        rows.live[j].draft.stepped()
    rows.live = [rows.live[j] for j in keep]
    if not keep:
        rows.predicted = rows.predicted[:0]
        return
    keep_t = torch.tensor(keep, device=rows.batch.mask.device)
    rows.batch.select(keep_t)
    if rows.lookup:
        logits, stay, written = ar_pass(rows.batch, rows.live, rows.predicted[keep_t], context_length(rows.batch.model))
        for row, n in zip(rows.live, written):
            for _ in range(n):  # each token written earns its credit toward a draft, as an AR step's does
                row.draft.stepped()
        rows.live = [rows.live[j] for j in stay]
    else:
        logits = rows.batch.encode(rows.predicted[keep_t][:, None], logits="last")
        for row in rows.live:
            row.stats.encoder_calls += 1
    if not rows.live:
        rows.predicted = rows.predicted[:0]
        return
    rows.predicted = predict(rows.live, logits)


@torch.inference_mode()
def verified_steps(rows: list[Row], params: BlockParams, ctx: LoopContext) -> Steps[None]:
    """Decode `rows` (and the newcomers `ctx` admits, between rounds) in verified mode, one step at a
    time (engines.decode.loop): a round, an AR step, a prefill. Rows with a skeleton (params.seeded,
    `ctx.seeder`) draft one round as skeleton-seeded answers (the skeleton is accepted for free
    wherever the values before it were); AR finishes the rest. The tokens lane's loop on a replica:
    AR requests decode here too, as rows that never draft (engines.replica.scheduler)."""
    model, lookup = ctx.model, ctx.lookup
    seeder = ctx.seeder if params.seeded else None
    context, largest, costs = context_length(model), model.config.canvas_length, ctx.draft_costs or DraftCosts()
    sure_below = SURE_ENTROPY if ctx.sure_entropy is None else ctx.sure_entropy
    batch, logits = prefill(model, rows, ctx.pad_id, logits="last")  # (B, V)
    yield
    if seeder is None:
        for row in rows:
            row.draft = DraftControl.for_request(row.request, params, largest, sure_below)
    drafting = Rows(batch, list(rows), predict(rows, logits), lookup)
    if seeder is not None:
        # Seeded drafts cover the answer from its start, so they serve one round; a plain canvas
        # drafted after a mismatch inside a value is mostly rejected under the grammar, so what
        # the seeded draft left, constrained AR finishes (the same tokens, at AR's cost).
        verify_round(drafting, params, seeder)
        if drafting.live:
            yield
            yield from ar_steps(drafting.live, None, ctx.alone())
        return
    stepping = Rows(batch, [], drafting.predicted[:0], lookup)  # rows writing by AR steps: none yet
    while True:
        if any(int(t) in r.stop_ids for r, t in zip(drafting.live, drafting.predicted)):
            ar_step(drafting)  # a row's next token ends it: commit it (the others' next too) rather than draft
            yield
        round_params = regroup(drafting, stepping, params, costs, context)
        spent = 0.0
        if round_params:
            spent = verify_round(drafting, round_params, costs=costs)
            yield
        # The AR batch takes about as long as the round did; alone, it runs until a row may draft
        # again (at most AR_STRETCH steps, so that newcomers get in).
        if round_params is None and stepping.live:
            wait = min(r.draft.steps_to_draft(costs, len(stepping.live), params.steps) for r in stepping.live)
            turns = min(max(1, wait), AR_STRETCH)
        else:
            turns = max(1, round(spent))
            if stepping.live and drafting.live:  # the drafting rows step with the others (regroup moves them back)
                turns = min(max(1, round(spent * STEP_SHARE)), int(AR_STRETCH * STEP_SHARE))  # newcomers wait at most that
                stepping.join(drafting.take(list(range(len(drafting.live)))))
        for _ in range(turns):
            if not stepping.live:
                break
            ar_step(stepping)
            yield
        running = len(drafting.live) + len(stepping.live)
        joining = yield from ctx.newcomers(running, logits="last")
        if joining:
            for row in joining.rows:
                row.draft = DraftControl.for_request(row.request, params, largest, sure_below)
            drafting.join(Rows(joining.batch, list(joining.rows), predict(joining.rows, joining.logits), lookup))
        if not drafting.live and not stepping.live:
            return
