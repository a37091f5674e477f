"""Vocabulary-wide arithmetic in bounded memory: what a canvas step does with its logits.

At DiffusionGemma's vocabulary (262,144) one canvas step's logits (B, C, V) are 268 MB per row in
fp32, and the library's step builds several more tensors of that shape (soft-capping, softmax for
sampling, the exponential draw inside `multinomial`, two Categorical entropies, the
self-conditioning softmax). Here the logits are the only (B, C, V) tensor: soft-capping is done in
place, and every other vocabulary-wide quantity is computed over CHUNK_ELEMENTS-sized slices of
positions and reduced at once to what the step keeps: tokens (B, C), entropies (B, C) and the
self-conditioning embeddings (B, C, H).

Each function computes the same numbers as the library's whole-tensor expression (tested bit for
bit on CPU): the slices hold whole vocabulary rows, so every reduction runs over the same values in
the same order, and random draws come from the row's generator in the same sequence. A slice holds
at least two positions (a single row of 262,144 makes torch split the reduction across threads).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

CHUNK_ELEMENTS = 1 << 24  # floats per slice: 64 MB in fp32, 64 positions at vocabulary 262,144


def slices(positions: int, vocab: int):
    """Consecutive (start, end) position ranges whose slices hold about CHUNK_ELEMENTS floats."""
    step = max(2, CHUNK_ELEMENTS // vocab)
    for start in range(0, positions, step):
        yield start, min(start + step, positions)


def soft_capped_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """`model.forward()`'s logits from hidden states (..., H): the tied lm_head, cast to fp32, then
    `tanh(x / cap) * cap` in place. A model in another dtype writes its fp32 logits slice by slice,
    so no half-precision copy of the whole tensor exists beside them."""
    head = model.lm_head
    if head.weight.dtype == torch.float32:
        logits = head(hidden)
    else:
        flat = hidden.reshape(-1, hidden.shape[-1])
        logits = torch.empty(flat.shape[0], head.weight.shape[0], dtype=torch.float32, device=hidden.device)
        for start, end in slices(flat.shape[0], logits.shape[1]):
            logits[start:end] = head(flat[start:end])
        logits = logits.view(*hidden.shape[:-1], -1)
    cap = model.final_logit_softcapping
    if cap:
        logits.div_(cap).tanh_().mul_(cap)
    return logits


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """`torch.distributions.Categorical(logits=logits).entropy()`: (..., V) -> (...)."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.empty(flat.shape[0], dtype=logits.dtype, device=logits.device)
    lowest = torch.finfo(logits.dtype).min
    for start, end in slices(*flat.shape):
        normalized = flat[start:end] - flat[start:end].logsumexp(-1, keepdim=True)
        probs = torch.softmax(normalized, dim=-1)
        out[start:end] = -normalized.clamp_(min=lowest).mul_(probs).sum(-1)
    return out.view(logits.shape[:-1])


def sample_tokens(logits: torch.Tensor, generator: torch.Generator, greedy: bool = False) -> torch.Tensor:
    """One row's draw: `torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)` for
    logits (C, V) -> tokens (C,). torch draws one sample by the exponential race, argmax(p / q) with
    q ~ Exp(1) drawn over the whole (C, V) in order; drawn here slice by slice, the same numbers.
    `greedy`: the most likely token of the same softmax, no draw."""
    out = torch.empty(logits.shape[0], dtype=torch.long, device=logits.device)
    for start, end in slices(*logits.shape):
        probs = torch.softmax(logits[start:end], dim=-1)
        if not greedy:
            probs.div_(torch.empty_like(probs).exponential_(1, generator=generator))
        out[start:end] = probs.argmax(-1)
    return out


_MANTISSA = (1 << 53) - 1  # the bits of a random64() draw that torch's uniform double keeps


def exponentials_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """The numbers `exponential_(1, generator=g)` writes in float32, from the 64-bit draws it makes.

    On a CPU generator torch's kernel makes them one at a time (~40 ns each here): per element one
    64-bit draw from the generator (`random64`), u its low 53 bits times 2**-53, then
    `float(-log1p(-u))` in double. `bits.random_(generator=g)` on int64 makes the same draws in the
    same order (each modulo 2**63: the low 53 bits intact, the generator left where exponential_
    leaves it), and this finishes them vectorized, eager or compiled: the same numbers bit for bit
    (tested: tests/engines/model/test_logits.py) in a fraction of the time."""
    # -u is exact (a power-of-two scale and a sign), so log1p sees the kernel's argument
    return bits.bitwise_and(_MANTISSA).double().mul(-(2.0**-53)).log1p().neg().float()


def self_conditioning_embeddings(model, logits: torch.Tensor) -> torch.Tensor:
    """What the decoder makes of last step's logits (B, C, V) before its self-conditioning block:
    softmax (in fp32) times the embedding matrix, times the embedding scale -> (B, C, H)."""
    embed = model.model.decoder.embed_tokens
    weight = embed.weight
    flat = logits.reshape(-1, logits.shape[-1])
    out = torch.empty(flat.shape[0], weight.shape[1], dtype=weight.dtype, device=logits.device)
    for start, end in slices(*flat.shape):
        probs = flat[start:end].to(weight.dtype).softmax(dim=-1, dtype=torch.float32).to(weight.dtype)
        out[start:end] = torch.matmul(probs, weight)
    return (out * embed.embed_scale.to(weight.dtype)).view(*logits.shape[:-1], -1)


class _Signal:
    """The self-conditioning embeddings (B, C, H) the decoder's next call reads, or None."""

    embeddings: torch.Tensor | None = None


def _signal_of(model) -> _Signal:
    """The model's self-conditioning slot: one forward pre-hook on the decoder's self-conditioning
    block, installed once and kept. It hands the block the slot's embeddings instead of what the
    decoder computed (zeros, since the decoder is called without logits). A hook that stays put
    keeps the decoder's code the same from call to call, which a compiled decoder needs (adding and
    removing a hook around every call would change what torch.compile guards on)."""
    block = model.model.decoder.self_conditioning
    signal = getattr(block, "_tandem_signal", None)
    if signal is None:
        signal = block._tandem_signal = _Signal()

        def supply(module, args):
            if signal.embeddings is None:
                return None
            # the decoder calls self_conditioning(inputs_embeds, soft_embeddings): fail loudly if that changes
            assert len(args) == 2 and args[1].shape == signal.embeddings.shape, "the decoder's self-conditioning call changed shape"
            return args[0], signal.embeddings

        block.register_forward_pre_hook(supply)
    return signal


@contextmanager
def self_conditioned_by(model, embeddings: torch.Tensor | None):
    """Run the decoder with `embeddings` (B, C, H) as its self-conditioning signal: the library
    takes last step's full logits and turns them into these inside its forward; the model's
    self-conditioning slot (`_signal_of`) hands it the embeddings computed above instead. With
    None, the decoder runs as it is (zeros: the first step's signal)."""
    signal = _signal_of(model)
    signal.embeddings = embeddings
    try:
        yield
    finally:
        signal.embeddings = None
