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

import torch

from engines.ar import next_tokens
from engines.batch import SequenceBatch, left_pad
from engines.block import BlockParams, denoise_canvas
from engines.rows import Row


def draft_canvas(batch: SequenceBatch, rows: list[Row], params: BlockParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The drafter: block mode's denoiser. Returns (draft (B, C), steps (B,))."""
    return denoise_canvas(batch, [r.generator for r in rows], params)


@torch.inference_mode()
def decode_verified(model, rows: list[Row], params: BlockParams, pad_id: int) -> None:
    device = model.device
    batch = SequenceBatch(model, len(rows), device)
    ids, valid = left_pad([r.prompt_ids for r in rows], pad_id, device)
    logits = batch.encode(ids, valid, logits="last")  # (B, V)
    live = list(rows)
    for r in live:
        r.stats.encoder_calls += 1
    predicted = next_tokens(live, logits[:, None])[:, 0]  # (B,) AR choice for the first draft position
    while True:
        draft, steps = draft_canvas(batch, live, params)  # (B, C)
        start = batch.slots
        commit_logits = batch.encode(draft, logits="all")  # (B, C, V): AR choice after each draft token
        ar = torch.cat([predicted[:, None], next_tokens(live, commit_logits)], dim=1)  # (B, C + 1)
        agree = (draft == ar[:, :-1]).long().cumprod(-1)  # (B, C) 1 up to the first mismatch
        accepted = agree.sum(-1)  # (B,)
        keep = []
        for j, r in enumerate(live):
            k = int(accepted[j])
            r.stats.decoder_calls += int(steps[j])
            r.stats.encoder_calls += 1
            r.stats.steps_per_canvas.append(int(steps[j]))
            r.stats.drafted += params.canvas
            r.stats.accepted += k
            r.extend(draft[j, :k].tolist() + [int(ar[j, k])])
            if not r.finished:
                keep.append(j)
        if not keep:
            return
        # Keep the KV of accepted draft tokens only; the AR token at the mismatch is encoded next.
        longest = int(accepted.max())
        batch.keep_slots(start + longest)
        batch.invalidate(torch.arange(longest, device=device)[None] < accepted[:, None], start)
        keep_t = torch.tensor(keep, device=device)
        batch.select(keep_t)
        live = [live[j] for j in keep]
        correction = ar[keep_t, accepted[keep_t]]  # (B,)
        logits = batch.encode(correction[:, None], logits="last")
        for r in live:
            r.stats.encoder_calls += 1
        predicted = next_tokens(live, logits[:, None])[:, 0]
