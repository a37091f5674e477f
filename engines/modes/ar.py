"""AR mode: the encoder alone, one chosen token per call, with the KV cache and the tied `lm_head`.

Finished rows leave the batch at once (`SequenceBatch.select`), and new requests join between
steps (`admit`), so a long request does not make short ones wait. With `lookup`, a greedy row's
step also checks a guess of the tokens after its chosen one, copied from earlier in its sequence,
and keeps what AR agrees with (`engines.modes.ar_lookup`): the same tokens, fewer calls where answers repeat.
"""

from __future__ import annotations

import torch

from engines.batch.prefill import prefill, prefill_joining
from engines.decode.canvas_settings import context_length
from engines.modes.ar_lookup import ar_pass
from engines.decode.rows import Admit, Row, retire
from engines.decode.sampling import choose_tokens
from engines.decode.steps import Steps, drain


def next_tokens(rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
    """AR choice per row from logits (B, L, V) -> tokens (B, L), each row with its own sampling
    settings. A row with a grammar chooses under its mask; its logits are one step (L == 1)."""
    return torch.stack([choose(r, logits[j]) for j, r in enumerate(rows)])


def choose(row: Row, logits: torch.Tensor, ahead: int = 0) -> torch.Tensor:
    """One row's AR choice from logits (L, V) -> tokens (L,). `ahead`: tokens past the row's
    output the choice is for (verified mode's lookahead), so a grammar knows the tokens left and
    keeps room to end in them (engines.grammar.constraint.TokenConstraint.keep_room)."""
    if row.constraint is None:
        return choose_tokens(logits, row.request.temperature, row.request.top_p, row.request.top_k, row.generator)
    assert logits.shape[0] == 1, "a constrained row chooses one token at a time"
    tokens_left = row.request.max_new_tokens - len(row.output) - ahead
    logits = row.constraint.mask_(logits[0].clone(), tokens_left)[None]
    token = choose_tokens(logits, row.request.temperature, row.request.top_p, row.request.top_k, row.generator)  # (1,)
    kept = row.constraint.keep_room(int(token[0]))  # the closer's token where the chosen one leaves no room to end
    return token if kept == int(token[0]) else torch.tensor([kept], dtype=token.dtype, device=token.device)


def decode_ar(model, rows: list[Row], pad_id: int, admit: Admit | None = None, max_batch: int = 0, lookup: bool = True) -> None:
    """Decode `rows` (and whatever `admit` hands over between steps, up to `max_batch` rows);
    `lookup`: greedy rows check prompt-lookup guesses in their steps (`engines.modes.ar_lookup`)."""
    drain(ar_steps(model, rows, pad_id, admit, max_batch, lookup))


@torch.inference_mode()
def ar_steps(model, rows: list[Row], pad_id: int, admit: Admit | None = None, max_batch: int = 0, lookup: bool = True) -> Steps[None]:
    """`decode_ar` one step at a time (engines.decode.steps): a token for every row, or a prefill."""
    batch, logits = prefill(model, rows, pad_id, logits="last")  # logits (B, V)
    yield
    live, context = list(rows), context_length(model)
    while True:
        tokens = next_tokens(live, logits[:, None])[:, 0]  # (B,)
        keep = retire(live, [[int(t)] for t in tokens])
        if keep:
            keep_t = torch.tensor(keep, device=model.device)
            batch.select(keep_t)
            live = [live[j] for j in keep]
            if lookup:
                logits, stay, _ = ar_pass(batch, live, tokens[keep_t], context)
                live = [live[j] for j in stay]
            else:
                logits = batch.encode(tokens[keep_t][:, None], logits="last")
                for r in live:
                    r.stats.encoder_calls += 1
            yield
        else:
            live = []
        joining, new_batch, new_logits = yield from prefill_joining(model, admit, max_batch - len(live), pad_id, logits="last")
        if joining:
            if live:
                batch.merge(new_batch)
                logits, live = torch.cat([logits, new_logits]), live + joining
            else:
                batch, logits, live = new_batch, new_logits, list(joining)
        if not live:
            return
