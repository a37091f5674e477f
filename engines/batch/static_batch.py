"""`SequenceBatch` over a slot cache (`engines.batch.static_cache`): the same two model calls and row
bookkeeping, with every tensor a compiled step reads kept at a fixed shape between row changes.

The batch's slot mask is a (B, S) buffer over the cache's whole bucket (slots not yet written are
False), `slots` is the write position (a host int, mirrored by the cache's 0-d device tensor the
layers read), and the encoder and decoder are handed masks built here from those tensors, so
neither the library's mask builders (which read the cache's length on the host) nor a growing
cache ever enter a model call. What changes a shape: a batch outgrowing its bucket (the cache
moves to the next power of two), and rows joining or leaving (a new cache of the new row count;
rows are not padded to batch buckets: a CPU step's cost follows the rows, and torch compiles
batch sizes as one dynamic dimension).

Which layout a model's batches use is the model's setting (`use_slot_cache`), set with its compiled
calls (`engines.batch.compiled`): the eager dynamic path stays the reference.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from engines.batch.sequence_batch import SequenceBatch
from engines.model.compiled_functions import compiled_version
from engines.model.logits import self_conditioned_by, soft_capped_logits
from engines.batch.static_cache import SlotCache, bucket, decoder_masks, encoder_masks


def use_slot_cache(model, on: bool = True) -> None:
    """Whether new batches of `model` keep their KV in a slot cache (`open_batch`)."""
    model._tandem_slot_cache = on


def uses_slot_cache(model) -> bool:
    return getattr(model, "_tandem_slot_cache", False)


def open_batch(model, rows: int) -> SequenceBatch:
    """An empty batch of `rows` rows in the layout the model is set to."""
    cls = StaticSequenceBatch if uses_slot_cache(model) else SequenceBatch
    return cls(model, rows, model.device)


class StaticSequenceBatch(SequenceBatch):
    def __init__(self, model, batch_size: int, device: torch.device, slots: int = 0):
        self.model = model
        self.cache = SlotCache.allocate(model, batch_size, bucket(slots))
        self.mask = torch.zeros(batch_size, self.cache.capacity, dtype=torch.bool, device=device)
        self.written = 0  # host copy of the cache's write position
        self.encoder_calls = 0
        self.decoder_calls = 0

    @property
    def slots(self) -> int:
        return self.written

    def encode(self, tokens: torch.Tensor, valid: torch.Tensor | None = None, logits: str = "last") -> torch.Tensor | None:
        if valid is None:
            valid = torch.ones_like(tokens, dtype=torch.bool)
        length = tokens.shape[1]
        self._make_room(self.written + length)
        positions = self.lengths()[:, None] + valid.long().cumsum(-1) - 1  # (B, L)
        start = self.written
        self.mask[:, start : start + length] = valid
        out = self.model.model.encoder(
            input_ids=tokens,
            attention_mask=encoder_masks(self.model, self.mask, start, length),
            cache=self.cache,
            position_ids=positions.clamp(min=0),
        )
        self._moved_to(start + length)
        self.encoder_calls += 1
        hidden = out.last_hidden_state  # (B, L, H)
        if logits == "none":
            return None
        return compiled_version(self.model, soft_capped_logits)(self.model, hidden if logits == "all" else hidden[:, -1])

    def canvas_inputs(self, canvas_length: int) -> tuple[torch.Tensor, dict]:
        positions = self.lengths()[:, None] + torch.arange(canvas_length, device=self.mask.device)  # (B, C)
        return positions, decoder_masks(self.model, self.mask, self.written, canvas_length)

    def denoise(self, canvas: torch.Tensor, self_conditioning: torch.Tensor | None, inputs=None) -> torch.Tensor:
        positions, masks = inputs or self.canvas_inputs(canvas.shape[1])
        with self_conditioned_by(self.model, self_conditioning):
            logits = compiled_version(self.model, decoder_logits)(self.model, canvas, self.cache, masks, positions)
        self.decoder_calls += 1
        return logits  # (B, C, V)

    def keep_slots(self, length: int) -> None:
        if length >= self.written:
            return
        self.mask[:, length:] = False
        self._moved_to(length)

    def merge(self, other: SequenceBatch) -> None:
        other = as_static(other)
        slots = max(self.written, other.written)
        capacity = bucket(slots)
        mine = self.cache.moved_to(self.model, None, capacity, slots - self.written)
        theirs = other.cache.moved_to(self.model, None, capacity, slots - other.written)
        merged = SlotCache.allocate(self.model, mine.rows + theirs.rows, capacity)
        for out, a, b in zip(merged.layers, mine.layers, theirs.layers):
            torch.cat([a.keys, b.keys], out=out.keys)
            torch.cat([a.values, b.values], out=out.values)
        self.mask = torch.cat([_shifted(self.mask, capacity, slots - self.written), _shifted(other.mask, capacity, slots - other.written)])
        self.cache = merged
        self._moved_to(slots)

    def select(self, rows: torch.Tensor) -> None:
        if rows.numel() == self.size and bool((rows == torch.arange(self.size, device=rows.device)).all()):
            return
        self.cache = self.cache.moved_to(self.model, rows, self.cache.capacity)
        self.mask = self.mask[rows]

    def copy_rows(self, rows: list[int]) -> "StaticSequenceBatch":
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        part = StaticSequenceBatch.__new__(StaticSequenceBatch)
        part.__dict__.update(self.__dict__)
        part.cache = self.cache.moved_to(self.model, index, self.cache.capacity, known=self.written)
        part.mask = self.mask[index]
        return part

    def restore(self, cache, mask: torch.Tensor) -> None:
        """Take a stored one-row prefix (its cache and slot mask, of either layout) as this batch's."""
        if isinstance(cache, SlotCache):
            self.cache, self.mask = cache, mask
            self.written = int(cache.write)
            return
        slots = mask.shape[1]
        self.cache = SlotCache.allocate(self.model, 1, bucket(slots))
        for layer, stored in zip(self.cache.layers, cache.layers):
            layer.keys[:, :, :slots].copy_(stored.keys)
            layer.values[:, :, :slots].copy_(stored.values)
        self.mask = _shifted(mask, self.cache.capacity, 0)
        self._moved_to(slots)

    def _make_room(self, slots: int) -> None:
        """Move the cache to a bigger bucket if `slots` slots do not fit."""
        if slots <= self.cache.capacity:
            return
        capacity = bucket(slots)
        self.cache = self.cache.moved_to(self.model, None, capacity)
        self.mask = _shifted(self.mask, capacity, 0)

    def _moved_to(self, written: int) -> None:
        self.written = written
        self.cache.write.fill_(written)


def decoder_logits(model, canvas: torch.Tensor, cache: SlotCache, masks: dict, positions: torch.Tensor) -> torch.Tensor:
    """A canvas step's model call and its logits head as one function: one compiled call per step
    where the model is compiled (a call's guards and launch paid once, the soft cap fused after the head)."""
    out = model.model.decoder(decoder_input_ids=canvas, cache=cache, decoder_attention_mask=masks, decoder_position_ids=positions)
    return soft_capped_logits(model, out.last_hidden_state)


def as_static(batch: SequenceBatch) -> StaticSequenceBatch:
    """`batch` in the slot layout (a dynamic batch's rows copied into a slot cache)."""
    if isinstance(batch, StaticSequenceBatch):
        return batch
    out = StaticSequenceBatch(batch.model, batch.size, batch.mask.device, batch.slots)
    slots = batch.slots
    for layer, stored in zip(out.cache.layers, batch.cache.layers):
        layer.keys[:, :, :slots].copy_(stored.keys)
        layer.values[:, :, :slots].copy_(stored.values)
    out.mask[:, :slots] = batch.mask
    out._moved_to(slots)
    return out


def as_dynamic(cache: SlotCache, model) -> DynamicCache:
    """A stored slot cache's written slots as the library's DynamicCache (a prefix restored in a dynamic batch)."""
    out = DynamicCache(config=model.config.get_text_config(decoder=True))
    written = int(cache.write)
    for i, layer in enumerate(cache.layers):
        out.update(layer.keys[:, :, :written].clone(), layer.values[:, :, :written].clone(), i)
    return out


def _shifted(mask: torch.Tensor, slots: int, shift: int) -> torch.Tensor:
    """`mask` (B, S) in a (B, slots) buffer, moved `shift` slots right (left padding), the rest False."""
    out = torch.zeros(mask.shape[0], slots, dtype=torch.bool, device=mask.device)
    n = min(mask.shape[1], slots - shift)
    out[:, shift : shift + n] = mask[:, :n]
    return out
