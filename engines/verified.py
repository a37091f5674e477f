"""Verified mode: diffusion drafts, checked token by token against the model's own AR choice.

A round, for context x_1..x_n whose last encoder pass predicted `next` for position n+1:
1. draft a canvas d_1..d_C in block mode;
2. commit pass: the encoder over the draft yields the AR choice a_i after every d_i;
3. accept the longest prefix with d_1 == next and d_i == a_{i-1}; append the AR token at
   the first mismatch (or a_C as a bonus when all match); drop the rest of the draft;
4. encode that one AR token, which predicts `next` for the following round.
Every output token is the AR choice given the tokens before it, so under greedy decoding the
output equals AR mode token for token; with sampling it is distributed exactly as AR sampling.
The accepted draft tokens' KV from the commit pass is kept; rejected slots are cropped (or,
where rows accepted different counts, masked).
"""

from __future__ import annotations

import time

import torch

from engines.ar import next_tokens
from engines.batch import SequenceBatch, prefill
from engines.block import BlockParams, denoise_canvas
from engines.rows import Admit, Row, retire


def draft_canvas(batch: SequenceBatch, rows: list[Row], params: BlockParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The drafter: block mode's denoiser. Returns (draft (B, C), steps (B,))."""
    return denoise_canvas(batch, [r.generator for r in rows], params)


@torch.inference_mode()
def decode_verified(
    model, rows: list[Row], params: BlockParams, pad_id: int, admit: Admit | None = None, max_batch: int = 0
) -> None:
    """Decode `rows` in verified mode; newcomers from `admit` join between rounds."""
    device = model.device
    batch, logits = prefill(model, rows, pad_id, logits="last")  # (B, V)
    live = list(rows)
    predicted = next_tokens(live, logits[:, None])[:, 0]  # (B,) AR choice for the first draft position
    while True:
        began = time.time_ns()
        draft, steps = draft_canvas(batch, live, params)  # (B, C)
        start = batch.slots
        commit_logits = batch.encode(draft, logits="all")  # (B, C, V): AR choice after each draft token
        ar = torch.cat([predicted[:, None], next_tokens(live, commit_logits)], dim=1)  # (B, C + 1)
        agree = (draft == ar[:, :-1]).long().cumprod(-1)  # (B, C) 1 up to the first mismatch
        accepted = agree.sum(-1)  # (B,)
        ended = time.time_ns()
        committed = []
        for j, row in enumerate(live):
            k = int(accepted[j])
            row.stats.decoder_calls += int(steps[j])
            row.stats.encoder_calls += 1
            row.stats.steps_per_canvas.append(int(steps[j]))
            row.stats.canvas_times_ns.append((began, ended))
            row.stats.drafted += params.canvas
            row.stats.accepted += k
            committed.append(draft[j, :k].tolist() + [int(ar[j, k])])
        keep = retire(live, committed)
        # Keep the KV of accepted draft tokens only; the AR token at the mismatch is encoded next.
        longest = int(accepted.max())
        batch.keep_slots(start + longest)
        batch.invalidate(torch.arange(longest, device=device)[None] < accepted[:, None], start)
        if keep:
            keep_t = torch.tensor(keep, device=device)
            batch.select(keep_t)
            live = [live[j] for j in keep]
            correction = ar[keep_t, accepted[keep_t]]  # (B,)
            logits = batch.encode(correction[:, None], logits="last")
            for row in live:
                row.stats.encoder_calls += 1
            predicted = next_tokens(live, logits[:, None])[:, 0]
        joining = admit(max_batch - len(keep)) if admit else []
        if joining:
            new_batch, new_logits = prefill(model, joining, pad_id, logits="last")
            new_predicted = next_tokens(joining, new_logits[:, None])[:, 0]
            if keep:
                batch.merge(new_batch)
                live, predicted = live + joining, torch.cat([predicted, new_predicted])
            else:
                batch, live, predicted = new_batch, list(joining), new_predicted
        if not keep and not joining:
            return
