"""A batch of sequences sharing one KV cache: the two model calls every decode mode is built from.

Rows have different lengths (left-padded prompts, verified rounds that accept different
numbers of tokens), so a boolean `mask` over cache slots marks which slots each row really
has, and positions are counted per row from it. RoPE makes attention depend on relative
positions only, so a row gets the same result alone or in a batch.

- `encode(tokens)`: causal encoder pass over new tokens; appends them to the cache and
  returns next-token logits (tied `lm_head` with final-logit soft-capping): prefill,
  canvas commit and AR steps.
- `denoise(canvas, ...)`: one bidirectional decoder pass over a canvas that reads the
  cache read-only; returns the canvas logits. The previous step's self-conditioning comes in as
  embeddings (B, C, H) (`engines.model.logits`), not as the library's (B, C, V) logits.
"""

from __future__ import annotations

import copy

import torch
from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

from engines.model.logits import self_conditioned_by, soft_capped_logits


class SequenceBatch:
    def __init__(self, model: DiffusionGemmaForBlockDiffusion, batch_size: int, device: torch.device):
        self.model = model
        self.cache = DynamicCache(config=model.config.get_text_config(decoder=True))
        self.mask = torch.zeros(batch_size, 0, dtype=torch.bool, device=device)  # (B, S) slots each row has
        self.encoder_calls = 0
        self.decoder_calls = 0

    @property
    def size(self) -> int:
        return self.mask.shape[0]

    @property
    def slots(self) -> int:
        return self.mask.shape[1]

    def lengths(self) -> torch.Tensor:
        return self.mask.sum(-1)  # (B,) real tokens per row

    def encode(
        self, tokens: torch.Tensor, valid: torch.Tensor | None = None, logits: str = "last"
    ) -> torch.Tensor | None:
        """Append `tokens` (B, L) to the cache; `valid` (B, L) marks real tokens (False = left padding).
        Returns next-token logits: `"all"` (B, L, V), `"last"` (B, V) or `"none"` (a commit needs only the KV)."""
        if valid is None:
            valid = torch.ones_like(tokens, dtype=torch.bool)
        positions = self.lengths()[:, None] + valid.long().cumsum(-1) - 1  # (B, L)
        self.mask = torch.cat([self.mask, valid], dim=1)
        out = self.model.model.encoder(
            input_ids=tokens,
            attention_mask=self.mask,
            cache=self.cache,
            position_ids=positions.clamp(min=0),
        )
        self.encoder_calls += 1
        hidden = out.last_hidden_state  # (B, L, H)
        if logits == "none":
            return None
        return soft_capped_logits(self.model, hidden if logits == "all" else hidden[:, -1])

    def canvas_inputs(self, canvas_length: int) -> tuple[torch.Tensor, dict]:
        """Positions (B, C) and attention masks for a canvas after each row's tokens. They hold for
        every denoising step of that canvas, so they are built once per canvas, as the library does."""
        device = self.mask.device
        positions = self.lengths()[:, None] + torch.arange(canvas_length, device=device)  # (B, C)
        decoder_mask = torch.nn.functional.pad(self.mask, (0, canvas_length), value=True)  # (B, S + C)
        masks = self.model.model.decoder.create_diffusion_decoder_attention_mask(
            config=self.model.config,
            inputs_embeds=torch.empty(self.size, canvas_length, 0, device=device),  # only (B, C) is read
            cache=self.cache,
            decoder_attention_mask=decoder_mask,
        )
        return positions, masks

    def denoise(
        self,
        canvas: torch.Tensor,
        self_conditioning: torch.Tensor | None,
        inputs: tuple[torch.Tensor, dict] | None = None,
    ) -> torch.Tensor:
        """One decoder pass over `canvas` (B, C) after each row's tokens; returns logits (B, C, V),
        float32, soft-capped: what the model's forward() returns for a canvas. `self_conditioning`
        is `engines.model.logits.self_conditioning_embeddings` of the previous step (None on the first).
        `inputs` is `canvas_inputs(C)`, passed in to reuse it across steps."""
        positions, mask_mapping = inputs or self.canvas_inputs(canvas.shape[1])
        with self_conditioned_by(self.model, self_conditioning):
            out = self.model.model.decoder(
                decoder_input_ids=canvas,
                cache=self.cache,
                decoder_attention_mask=mask_mapping,
                decoder_position_ids=positions,
            )
        self.decoder_calls += 1
        return soft_capped_logits(self.model, out.last_hidden_state)  # (B, C, V)

    def keep_slots(self, length: int) -> None:
        """Forget every cache slot from `length` on (rejected draft tokens)."""
        if length >= self.slots:
            return
        try:
            self.cache.crop(length - self.slots)  # transformers 5 takes the (negative) count to remove
        except (ValueError, RuntimeError):
            # A sliding-window layer past its window cannot roll back: keep the slots, masked out.
            self.mask[:, length:] = False
            return
        self.mask = self.mask[:, :length]

    def invalidate(self, row_valid: torch.Tensor, start: int) -> None:
        """Slots `start : start + n` stop belonging to rows where `row_valid` (B, n) is False."""
        self.mask[:, start : start + row_valid.shape[1]] &= row_valid

    def merge(self, other: "SequenceBatch") -> None:
        """Append `other`'s rows: new requests join a running batch. The shorter side's cache is
        left-padded with masked slots, so every row keeps its own positions."""
        slots = max(self.slots, other.slots)
        for mine, theirs in zip(self.cache.layers, other.cache.layers):
            mine.keys = torch.cat([_pad_slots(mine.keys, slots, 2), _pad_slots(theirs.keys, slots, 2)])  # (B, H, S, D)
            mine.values = torch.cat([_pad_slots(mine.values, slots, 2), _pad_slots(theirs.values, slots, 2)])
            if hasattr(mine, "cumulative_length"):  # sliding-window layers count slots seen
                mine.cumulative_length = slots
        self.mask = torch.cat([_pad_slots(self.mask, slots, 1), _pad_slots(other.mask, slots, 1)])

    def copy_rows(self, rows: list[int]) -> "SequenceBatch":
        """A new batch holding copies of `rows` (their KV and mask); this batch is unchanged."""
        index = torch.tensor(rows, dtype=torch.long, device=self.mask.device)
        part = copy.copy(self)
        part.cache = copy.copy(self.cache)
        part.cache.layers = [copy.copy(layer) for layer in self.cache.layers]
        part.cache.batch_select_indices(index)  # rebinds the copied layers' tensors; the originals keep theirs
        part.mask = self.mask[index]  # (R, S)
        return part

    def select(self, rows: torch.Tensor) -> None:
        """Keep only `rows` (indices, in that order) of the batch: finished requests leave at once."""
        if rows.numel() == self.size and bool((rows == torch.arange(self.size, device=rows.device)).all()):
            return
        self.cache.batch_select_indices(rows)
        self.mask = self.mask[rows]


def _pad_slots(t: torch.Tensor, slots: int, dim: int) -> torch.Tensor:
    """Left-pad `t` with zeros along `dim` to `slots` entries."""
    missing = slots - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)
