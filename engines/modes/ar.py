"""AR mode's loop: the encoder alone, one chosen token per call, with the KV cache and the tied `lm_head`.

Where it runs: a served AR request never reaches this loop from the scheduler. A replica decodes AR
requests in verified's loop, as rows that never draft (engines.replica.scheduler: one encoder pass
serves both, and AR's rows batch with verified's). This loop runs for the rows verified's and
seeded block's loops finish by plain AR steps (seeded drafts, a skeleton that is not the answer),
and for the thread-per-request helper (`engines.replica.direct`: tests, benchmarks, warm-up).
`choose` and `next_tokens`, AR's choice per row, are what every loop's AR steps use.

Finished rows leave the batch at once (`SequenceBatch.select`), and new requests join between
steps (`ctx.newcomers`), so a long request does not make short ones wait. With `ctx.lookup`, a greedy
row's step also checks a guess of the tokens after its chosen one, copied from earlier in its sequence,
and keeps what AR agrees with (`engines.modes.ar_lookup`): the same tokens, fewer calls where answers repeat.
"""

from __future__ import annotations

import torch

from engines.batch.prefill import prefill
from engines.decode.canvas_settings import BlockParams, context_length
from engines.decode.loop import LoopContext
from engines.decode.rows import Row, retire
from engines.decode.sampling import choose_tokens
from engines.decode.steps import Steps
from engines.modes.ar_lookup import ar_pass


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


@torch.inference_mode()
def ar_steps(rows: list[Row], params: BlockParams | None, ctx: LoopContext) -> Steps[None]:
    """Decode `rows` (and the newcomers `ctx` admits) by AR steps, one step at a time
    (engines.decode.loop): a token for every row, or a prefill. `params` is unused (AR has no canvas)."""
    model = ctx.model
    batch, logits = prefill(model, rows, ctx.pad_id, logits="last")  # logits (B, V)
    yield
    live, context = list(rows), context_length(model)
    while True:
        tokens = next_tokens(live, logits[:, None])[:, 0]  # (B,)
        keep = retire(live, [[int(t)] for t in tokens])
        if keep:
            keep_t = torch.tensor(keep, device=model.device)
            batch.select(keep_t)
            live = [live[j] for j in keep]
            if ctx.lookup:
                logits, stay, _ = ar_pass(batch, live, tokens[keep_t], context)
                live = [live[j] for j in stay]
            else:
                logits = batch.encode(tokens[keep_t][:, None], logits="last")
                for r in live:
                    r.stats.encoder_calls += 1
            yield
        else:
            live = []
        joining = yield from ctx.newcomers(len(live), logits="last")
        if joining:
            batch, live, logits = joining.merged(batch, live, logits)
        if not live:
            return
