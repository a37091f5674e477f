"""AR mode: the encoder alone, one token per call, with the KV cache and the tied `lm_head`.

Finished rows leave the batch at once (`SequenceBatch.select`), so a long request does not
make short ones wait, and a short one does not keep costing compute.
"""

from __future__ import annotations

import torch

from engines.batch import SequenceBatch, left_pad
from engines.rows import Row
from engines.sampling import choose_tokens


def next_tokens(rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
    """AR choice per row from logits (B, L, V) -> tokens (B, L), each row with its own sampling settings."""
    return torch.stack(
        [
            choose_tokens(logits[j], r.request.temperature, r.request.top_p, r.request.top_k, r.generator)
            for j, r in enumerate(rows)
        ]
    )


@torch.inference_mode()
def decode_ar(model, rows: list[Row], pad_id: int) -> None:
    device = model.device
    batch = SequenceBatch(model, len(rows), device)
    ids, valid = left_pad([r.prompt_ids for r in rows], pad_id, device)
    logits = batch.encode(ids, valid, logits="last")  # (B, V)
    live = list(rows)
    for r in live:
        r.stats.encoder_calls += 1
    while True:
        tokens = next_tokens(live, logits[:, None])[:, 0]  # (B,)
        keep = []
        for j, r in enumerate(live):
            r.extend([int(tokens[j])])
            if not r.finished:
                keep.append(j)
        if not keep:
            return
        keep_t = torch.tensor(keep, device=device)
        batch.select(keep_t)
        live = [live[j] for j in keep]
        logits = batch.encode(tokens[keep_t][:, None], logits="last")
        for r in live:
            r.stats.encoder_calls += 1
