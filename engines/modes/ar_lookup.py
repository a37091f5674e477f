"""Prompt lookup: guesses of a row's next tokens copied from earlier in its own sequence, checked
in the pass that encodes the token AR just chose. Lossless, as verified mode's drafts are: a
guessed token is kept only where it equals AR's greedy choice after the tokens before it.

Agent answers repeat what they read (names, JSON keys, identifiers) and a small model's long
answers loop; where the sequence's last tokens occurred before, what followed them then is a
free guess of what follows now. transformers' `PromptLookupCandidateGenerator` finds it by scanning
the whole sequence on every call (~0.2 ms per row per step on this CPU, plus building the tensor:
at batch 8 as much as the step itself), so each row keeps an index of its n-grams instead, grown by
the tokens each step adds, and guesses what followed the tail's most recent earlier occurrence
(the last lap of a loop). Each row keeps the odds that a guessed token is accepted once the ones before it were (a geometric model
over its own history, old evidence decaying: `Lookup`), and a pass guesses only as far as the
tokens it expects pay for the wider pass at the batch's size (`guess_width`). Where no row's
guesses pay, the pass is a plain AR step: an answer that never repeats costs what AR costs.

Greedy rows without a grammar only: a sampled token or a grammar's choice is not the argmax the
check compares against.
"""

from __future__ import annotations

import torch

from engines.decode.prompt_lookup import Lookup  # noqa: F401 - re-exported: a row's guessing state
from engines.decode.rows import Row, retire
from engines.decode.sampling import GREEDY_BELOW

MOST_GUESSED = 32  # the widest guess per pass
WIDTHS = (1, 2, 4, 8, 16, MOST_GUESSED)


def pass_cost(width: int, batch: int) -> float:
    """An encoder pass over `width` tokens per row at `batch` rows, in AR steps (width 1) at that
    batch. Fitted to this project's 2-vCPU VM (1 torch thread, 300-token context): batch 1,
    widths 2 / 8 / 32 / 64 cost 1.10 / 1.25 / 1.56 / 1.92 AR steps; batch 8, 1.10 / 1.53 / 3.08 / 5.3.
    A fixed extra for any second token, then a slope that grows with the batch."""
    if width <= 1:
        return 1.0
    return 1.08 + (width - 1) * (0.0053 + 0.0077 * batch)


def guesses(live: list[Row], context: int) -> list[list[int]]:
    """Each row's guess of its next tokens after the one it just committed (empty where it may not
    guess: sampling, a grammar, no room left before max_new_tokens or the context's end)."""
    out = []
    for row in live:
        if row.constraint is not None or row.request.temperature >= GREEDY_BELOW:
            out.append([])
            continue
        room = min(row.request.max_new_tokens, context - len(row.prompt_ids)) - len(row.output) - 1
        if row.lookup is None:
            row.lookup = Lookup()
        out.append(row.lookup.guess(row, min(MOST_GUESSED, room)))
    return out


def guess_width(live: list[Row], found: list[list[int]]) -> int:
    """Guessed tokens per row the pass checks: the width that writes the most tokens per AR step's
    time, by each row's odds (0: none pays, a plain AR step)."""
    longest = max(map(len, found), default=0)
    best, best_rate = 0, float(len(live))  # a plain step writes one token per row
    for width in WIDTHS:
        if width > longest:
            break
        tokens = sum(1 + row.lookup.expected(min(width, len(g))) for row, g in zip(live, found) if g) + sum(not g for g in found)
        rate = tokens / pass_cost(1 + width, len(live))
        if rate > best_rate:
            best, best_rate = width, rate
    return best


def encode_checked(batch, live: list[Row], chosen: torch.Tensor, rests: list[list[int]]) -> tuple[torch.Tensor, list[int], list[int]]:
    """Encode each row's chosen (already committed) token, `chosen` (B,), followed by its guess of
    the tokens after it (`rests`, greedy rows only), and commit the longest prefix of each guess
    that equals AR's argmax, in one pass. Returns the logits after each staying row's last
    committed token (B', V), the batch indices of the rows that stay (the batch is narrowed to
    them), and how many of each row's guessed tokens AR agreed with."""
    device = batch.mask.device
    width = max(map(len, rests), default=0)
    if width == 0:
        logits = batch.encode(chosen[:, None], logits="last")  # (B, V): a plain AR step
        return logits, list(range(len(live))), [0] * len(live)
    tokens = torch.zeros(len(live), 1 + width, dtype=torch.long, device=device)
    valid = torch.zeros_like(tokens, dtype=torch.bool)
    tokens[:, 0], valid[:, 0] = chosen, True
    for j, rest in enumerate(rests):
        if rest:
            tokens[j, 1 : 1 + len(rest)], valid[j, 1 : 1 + len(rest)] = torch.tensor(rest, dtype=torch.long, device=device), True
    start = batch.slots
    logits = batch.encode(tokens, valid, logits="all")  # (B, 1 + W, V): AR's choice after each token
    agreed = ((tokens[:, 1:] == logits[:, :-1].argmax(-1)) & valid[:, 1:]).long().cumprod(-1).sum(-1)  # (B,)
    longest = int(agreed.max())
    batch.keep_slots(start + 1 + longest)
    batch.invalidate(torch.arange(1 + longest, device=device)[None] <= agreed[:, None], start)
    last = logits[torch.arange(len(live), device=device), agreed]  # (B, V)
    agreed = agreed.tolist()
    keep = retire(live, [tokens[j, 1 : 1 + agreed[j]].tolist() for j in range(len(live))])
    if keep and len(keep) < len(live):
        batch.select(torch.tensor(keep, device=device))
    return last[keep], keep, agreed


def ar_pass(batch, live: list[Row], chosen: torch.Tensor, context: int) -> tuple[torch.Tensor, list[int], list[int]]:
    """An AR step with prompt lookup: encode each row's chosen token and, where it pays, its guess of
    the tokens after it (`encode_checked`); updates each guessing row's odds and stats. Returns
    the logits after each staying row's last token (B', V), their batch indices, and the tokens
    each row's guess wrote."""
    found = guesses(live, context)
    width = guess_width(live, found)
    rests = [g[:width] for g in found]
    before = [len(row.output) for row in live]
    logits, keep, agreed = encode_checked(batch, live, chosen, rests)
    written = [len(row.output) - b for row, b in zip(live, before)]  # the guesses' tokens a stop let through
    for row, rest, k, n in zip(live, rests, agreed, written):
        row.stats.encoder_calls += 1
        row.stats.looked_up += n
        if rest:
            row.lookup.observe(len(rest), k)
    return logits, keep, written
