"""A batch's first encoder pass: rows' prompts (and what they have written so far) left-padded
into a new batch in the model's layout (`engines.batch.static_batch.open_batch`), on top of a stored
prefix where the row has one (`engines.batch.prefix_cache`)."""

from __future__ import annotations

import torch

from engines.batch.sequence_batch import SequenceBatch
from engines.batch.static_cache import SlotCache
from engines.batch.static_batch import StaticSequenceBatch, as_dynamic, open_batch


def prefill(model, rows, pad_id: int, logits: str) -> tuple[SequenceBatch, torch.Tensor | None]:
    """A new batch holding `rows`' contexts (left-padded): the prompt and what the row has written
    so far (a seeded answer that AR finishes), and the prefill's logits. Rows with a shared prefix
    (`Row.prefix_cache`, engines/batch/prefix_cache.py) are encoded on top of it, one by one; the rest
    together. The batch's rows are in `rows`' order."""
    shared = [i for i, r in enumerate(rows) if r.prefix_cache is not None]
    plain = [i for i in range(len(rows)) if i not in set(shared)]
    parts = []
    if plain:
        batch = open_batch(model, len(plain))
        ids, valid = left_pad([rows[i].prompt_ids + rows[i].output for i in plain], pad_id, model.device)
        parts.append((batch, batch.encode(ids, valid, logits=logits)))
    parts += [_prefill_on_prefix(model, rows[i], logits) for i in shared]
    for r in rows:
        r.stats.encoder_calls += 1  # the prefill, in one or two parts
    batch, out = parts[0]
    for other, _ in parts[1:]:
        batch.merge(other)
    if len(parts) > 1 and out is not None:
        out = torch.cat([o for _, o in parts])
    order = plain + shared  # where each row sits now; put them back in `rows`' order
    if order != sorted(order):
        back = torch.tensor([order.index(i) for i in range(len(rows))], device=model.device)
        batch.select(back)
        out = out[back] if out is not None else None
    return batch, out


def _prefill_on_prefix(model, row, logits: str) -> tuple[SequenceBatch, torch.Tensor | None]:
    """One row's prefill in chunks cut at its `prefix_bounds`: the longest head the cache holds is
    reused, the chunks after it are encoded one by one, then the rest of the context. The first
    head (what other conversations share: a system prompt, tools) and the last (what this
    conversation's next turn starts with) are stored. Cold or warm, the chunks are the same."""
    context = row.prompt_ids + row.output
    bounds = row.prefix_bounds
    keys = [tuple(context[:b]) for b in bounds]
    batch = open_batch(model, 1)
    start = 0
    found = row.prefix_cache.longest(keys)
    if found is not None:
        i, stored = found
        restore(batch, stored.cache, stored.mask)
        start = bounds[i]
        row.stats.prefix_tokens_reused = stored.tokens
    for j, end in enumerate(bounds):
        if end <= start:
            continue
        batch.encode(torch.tensor([context[start:end]], device=model.device), logits="none")
        start = end
        if j in (0, len(bounds) - 1):
            row.prefix_cache.put(keys[j], batch.cache, batch.mask)
    rest = torch.tensor([context[start:]], device=model.device)
    return batch, batch.encode(rest, logits=logits)




def left_pad(sequences: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> (ids (B, L), valid (B, L)) left-padded to the longest."""
    L = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long, device=device)
    valid = torch.zeros((len(sequences), L), dtype=torch.bool, device=device)
    for i, s in enumerate(sequences):
        if s:
            ids[i, L - len(s) :] = torch.tensor(s, dtype=torch.long, device=device)
            valid[i, L - len(s) :] = True
    return ids, valid


def restore(batch: SequenceBatch, cache, mask: torch.Tensor) -> None:
    """Make a stored one-row prefix (a cache and its slot mask, stored from a batch of either layout)
    the start of `batch`."""
    if isinstance(batch, StaticSequenceBatch):
        batch.restore(cache, mask)
        return
    if isinstance(cache, SlotCache):
        written = int(cache.write)
        cache, mask = as_dynamic(cache, batch.model), mask[:, :written]
    batch.cache, batch.mask = cache, mask
