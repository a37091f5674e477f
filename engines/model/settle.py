"""What a denoising step does with its logits once its random draws are made: one function of
tensors, so that a compiled engine runs it as one compiled call (`engines.batch.compiled`) instead of
dozens of small eager operators per step.

`settle` follows transformers' `_denoising_step` after the decoder call: the argmax canvas, the
positions' entropies (once, read by the sampler and the stop rule), the entropy-bound sampler's
accept/renoise, the next step's self-conditioning embeddings, rows that have stopped held as they
were, and the stable-and-confident stop rule. The draws that come from each request's own
generator (the sampled tokens and the renoise canvas, `engines.decode.sampling`) are made before it, on
the host's loop, in the order the library makes them; torch.compile cannot take a generator.

The vocabulary-wide work stays in `engines.model.logits`' slices, so the logits remain the step's only
(B, C, V) tensor compiled or not (a compiled call unrolls the slices: one at the shipped model's
vocabulary, B * C / 64 at 262,144).
"""

from __future__ import annotations

import torch

from engines.model.logits import exponentials_from_bits, self_conditioning_embeddings, token_entropy


def settle(
    model,
    logits: torch.Tensor,  # (B, C, V), temperature applied
    sampled: torch.Tensor,  # (B, C) drawn tokens (greedy: the argmax)
    noise: torch.Tensor,  # (B, C) the renoise canvas
    current: torch.Tensor,  # (B, C) the canvas this step denoised
    argmax: torch.Tensor,  # (B, C) the last step's argmax canvas
    self_conditioning: torch.Tensor,  # (B, C, H) the last step's embeddings
    done: torch.Tensor,  # (B,) rows that have stopped
    abandoned: torch.Tensor,  # (B,) rows dropped at their first step (verified's drafts)
    history: torch.Tensor,  # (K, B, C) the last K argmax canvases (K = stability threshold), -1 at first
    entropy_bound: torch.Tensor,  # 0-d
    confidence_threshold: torch.Tensor,  # 0-d
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns the step's argmax canvas, next canvas, self-conditioning embeddings, stop flags and
    argmax history."""
    new_argmax = logits.argmax(-1)  # (B, C)
    entropy = token_entropy(logits)  # (B, C)
    # The entropy-bound sampler: accept the lowest-entropy positions while the entropy of those
    # before each stays within the bound; the rest are renoised.
    ordered, order = torch.sort(entropy, dim=-1, descending=False)
    chosen = torch.cumsum(ordered, dim=-1) - ordered <= entropy_bound
    accepted = torch.scatter(torch.zeros_like(chosen), -1, order, chosen)
    new_current = torch.where(accepted, sampled, noise)
    conditioning = self_conditioning_embeddings(model, logits)  # (B, C, H)
    held = done[:, None]
    new_argmax = torch.where(held, argmax, new_argmax)
    new_current = torch.where(held, current, new_current)
    conditioning = torch.where(held[..., None], self_conditioning, conditioning)
    if history.shape[0] == 0:
        stable = torch.ones_like(done)
    else:
        stable = (history == new_argmax[None]).all(dim=-1).all(dim=0)
        history = torch.cat([history[1:], new_argmax[None]])
    done = done | (stable & (entropy.mean(-1) < confidence_threshold)) | abandoned
    return new_argmax, new_current, conditioning, done, history


def sample_and_settle(
    model,
    logits: torch.Tensor,  # (B, C, V), before temperature
    temperature: torch.Tensor,  # 0-d
    race_bits: torch.Tensor,  # (B, C, V) int64: each row's race draws (RowSeededEntropyBoundSampler.race_bits)
    *state: torch.Tensor,  # settle's arguments after `sampled`: noise, current, argmax, ... confidence_threshold
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The temperature, the draw and `settle` as one function: a compiled step fuses the race's
    exponentials, the softmax, the divide and the argmax with settle's passes over the logits instead
    of running them row by row on the host. The draw is `engines.model.logits.sample_tokens`'s: argmax(p / q).
    Takes the race's draws as a tensor of twice the logits' bytes, so it serves small vocabularies
    on a CPU only (block.py decides)."""
    logits = logits / temperature
    sampled = (torch.softmax(logits, dim=-1) / exponentials_from_bits(race_bits)).argmax(-1)
    return settle(model, logits, sampled, *state)
