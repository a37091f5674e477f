"""A fixed-size KV cache for a batch: every layer's keys and values preallocated for a bucket of
slots, written in place at one write position, with the attention masks built from device tensors.

transformers' DynamicCache grows by concatenation on every call, so each AR step hands a compiled
encoder new shapes and new addresses (it hit torch's recompile limit within two batches). Here a
batch's cache holds `bucket(slots)` slots (powers of two from MIN_SLOTS): an AR step writes one
slot in place and every input keeps its shape until the batch outgrows its bucket or changes rows,
so a compiled encoder and decoder see a handful of shapes per replica, not one per token.

The layers are the library's `StaticLayer` (what its compiled generation uses), with one change:
all layers share the batch's write position (a 0-d device tensor) and the batch moves it once per
call, so positions, cropping (verified's rejected drafts) and row changes are the batch's business,
not each layer's. Every layer holds all slots, sliding-window layers too: their window is applied by
the mask, as the dynamic path's is (slot distance, like the library's masks), so a cropped or
merged batch never needs a rolled buffer.

The decoder reads the cache through the library's `append_to_cache` for compileable caches: the
canvas's keys go at the write position of a (B, H, S + C, D) copy, so its mask has S + C columns.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, StaticLayer
from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaEncoderTextAttention

MIN_SLOTS = 256  # the smallest bucket: a short prompt and its first canvas fit without regrowing


def bucket(slots: int) -> int:
    """The buffer size for `slots` slots: the next power of two, at least MIN_SLOTS."""
    return max(MIN_SLOTS, 1 << max(slots - 1, 0).bit_length())


class SlotLayer(StaticLayer):
    """One layer's preallocated keys and values (B, H, S, D), written at the batch's write position."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, write: torch.Tensor):
        super().__init__(max_cache_len=keys.shape[2])
        self.keys, self.values, self.cumulative_length = keys, values, write
        self.device, self.dtype = keys.device, keys.dtype
        self.batch_size, self.num_heads = keys.shape[:2]
        self.k_head_dim, self.v_head_dim = keys.shape[-1], values.shape[-1]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Write the new keys and values (B, H, L, D) at the write position; return the whole buffers.
        The position is not moved here (the batch moves it once for all layers)."""
        at = torch.arange(key_states.shape[-2], device=self.device) + self.cumulative_length
        self.keys.index_copy_(2, at, key_states)
        self.values.index_copy_(2, at, value_states)
        return self.keys, self.values


class SlotCache(Cache):
    """Every layer's `SlotLayer`, sharing `write` (0-d long tensor: slots written so far)."""

    def __init__(self, layers: list[SlotLayer], write: torch.Tensor):
        super().__init__(layers=layers)
        self.write = write

    @classmethod
    def allocate(cls, model, rows: int, slots: int) -> "SlotCache":
        """Zeroed buffers for `rows` rows and `slots` slots in the model's dtype and device."""
        device, dtype = model.device, model.dtype
        write = torch.zeros((), dtype=torch.long, device=device)
        layers = []
        for heads, dim in kv_shapes(model):
            keys = torch.zeros(rows, heads, slots, dim, dtype=dtype, device=device)
            layers.append(SlotLayer(keys, torch.zeros_like(keys), write))
        if device.type == "cuda":
            # A captured graph reads these buffers where they are instead of copying them in at every
            # replay (what the library's StaticLayer does). A new buffer (rows joining or leaving, a
            # bigger bucket) is a new address: the graph is captured again (a buffer pool per bucket
            # is the next step, unmeasured without a GPU).
            for layer in layers:
                torch._dynamo.mark_static_address(layer.keys)
                torch._dynamo.mark_static_address(layer.values)
            torch._dynamo.mark_static_address(write)
        return cls(layers, write)

    @property
    def rows(self) -> int:
        return self.layers[0].keys.shape[0]

    @property
    def capacity(self) -> int:
        return self.layers[0].keys.shape[2]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return int(self.write)

    def moved_to(self, model, rows: torch.Tensor | None, slots: int, shift: int = 0, written: int | None = None,
                 known: int | None = None) -> "SlotCache":
        """A new cache of `slots` slots holding `rows` (indices; None: all) of this one, each slot moved
        `shift` slots to the right (room for left padding), with `written` slots written (default:
        this cache's plus `shift`). `known`: this cache's written slots if the caller knows them (no
        read of the device's write position: a canvas's steps copy rows without one)."""
        out = SlotCache.allocate(model, self.rows if rows is None else rows.numel(), slots)
        n = min(int(self.write) if known is None else known, slots - shift)
        for mine, theirs in zip(out.layers, self.layers):
            for dst, src in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
                part = src[:, :, :n] if rows is None else src[rows, :, :n]
                dst[:, :, shift : shift + n].copy_(part)
        out.write.fill_(n + shift if written is None else written)
        return out


def kv_shapes(model) -> list[tuple[int, int]]:
    """(key/value heads, head width) of each encoder layer, read from its attention module (Gemma-style
    configs give full-attention layers other widths and head counts than sliding ones)."""
    shapes = [(m.k_proj.out_features // m.head_dim, m.head_dim) for m in model.modules() if isinstance(m, DiffusionGemmaEncoderTextAttention)]
    assert len(shapes) == model.config.get_text_config(decoder=True).num_hidden_layers, "one encoder attention per layer expected"
    return shapes


def encoder_masks(model, mask: torch.Tensor, start: int, length: int) -> dict[str, torch.Tensor]:
    """Attention masks (B, 1, L, S) for encoding `length` tokens written at slot `start` of a batch
    whose slot mask (after the write) is `mask` (B, S): causal over slots, padding masked, sliding
    layers within their window. A query always sees its own slot, so a padding query's row is never
    empty (an all-masked row would put NaN into the keys of later layers)."""
    config = model.config.get_text_config(decoder=True)
    slots = torch.arange(mask.shape[1], device=mask.device)
    query = start + torch.arange(length, device=mask.device)  # (L,) slot of each query
    causal = slots[None, :] <= query[:, None]  # (L, S)
    own = slots[None, :] == query[:, None]
    full = (mask[:, None, :] & causal[None]) | own[None]  # (B, L, S)
    masks = {"full_attention": full[:, None]}
    window = getattr(config, "sliding_window", None)
    if window is not None:
        near = slots[None, :] > query[:, None] - window
        masks["sliding_attention"] = ((mask[:, None, :] & causal[None] & near[None]) | own[None])[:, None]
    return _as_attention_wants(model, masks)


def decoder_masks(model, mask: torch.Tensor, written: int, canvas: int) -> dict[str, torch.Tensor]:
    """Attention masks (B, 1, C, S + C) for a canvas of `canvas` tokens after the `written` slots of
    a batch whose slot mask is `mask` (B, S): the decoder's keys are the cache's S slots with the
    canvas's at `written : written + C` (transformers' `append_to_cache` for a compileable cache).
    The canvas sees every row's real slots before it and itself, both ways."""
    config = model.config.get_text_config(decoder=True)
    B, S = mask.shape
    keys = torch.arange(S + canvas, device=mask.device)
    is_canvas = (keys >= written) & (keys < written + canvas)  # (S + C,)
    before = torch.nn.functional.pad(mask, (0, canvas)) & (keys < written)  # (B, S + C)
    full = (before | is_canvas)[:, None, None, :].expand(B, 1, canvas, S + canvas)
    masks = {"full_attention": full}
    window = getattr(config, "sliding_window", None)
    if window is not None:
        query = written + torch.arange(canvas, device=mask.device)
        near = keys[None, :] > query[:, None] - window  # (C, S + C)
        masks["sliding_attention"] = (before[:, None, :] & near[None] | is_canvas)[:, None]
    return _as_attention_wants(model, masks)


def _as_attention_wants(model, masks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """SDPA takes boolean masks (True: attend); the eager attention adds a float mask to its scores."""
    how = model.config.get_text_config(decoder=True)._attn_implementation
    if how == "sdpa":
        return masks
    assert how == "eager", f"the slot cache builds masks for sdpa and eager attention, not {how!r}"
    lowest = torch.finfo(model.dtype).min
    return {k: torch.zeros(m.shape, dtype=model.dtype, device=m.device).masked_fill_(~m, lowest) for k, m in masks.items()}
