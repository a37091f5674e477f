"""Token choice for every mode, on per-request random generators.

Each request owns a `torch.Generator` seeded from its `seed`, and every random draw for a row
comes from that row's generator only. So a request decodes to the same tokens alone or in any
batch, and at batch 1 the draws happen in the same order as in transformers' `generate()`.

- Block mode reuses the library's `EntropyBoundSampler` (accept/renoise) and
  `LinearTemperatureScheduleLogitsProcessor`; only canvas noise is drawn per row here.
- AR and verified modes use the library's temperature / top-k / top-p logits warpers.
"""

from __future__ import annotations

import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    EntropyBoundSampler,
    EntropyBoundSamplerConfig,
)

GREEDY_BELOW = 1e-4  # temperatures under this are greedy (the argmax is what they would sample anyway)


def make_generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    if seed is None:
        g.seed()  # non-deterministic, as an unseeded API request expects
    else:
        g.manual_seed(seed)
    return g


class RowSeededEntropyBoundSampler(EntropyBoundSampler):
    """The library's entropy-bound sampler, with canvas noise drawn from each row's own generator.

    Rows whose canvas has already stopped (`active` False) draw nothing, exactly as they would
    if decoded alone (the library's loop breaks out at batch 1). `greedy` takes each position's
    most likely token instead of a draw: verified mode's drafts, which only need to guess AR's
    choice (and skip `multinomial`, a third of a CPU step at a 256-token canvas)."""

    def __init__(self, entropy_bound: float, canvas_length: int, vocab_size: int, generators: list[torch.Generator], greedy: bool = False):
        super().__init__(EntropyBoundSamplerConfig(entropy_bound=float(entropy_bound)), canvas_length, vocab_size, 0)
        self.generators = generators
        self.greedy = greedy
        self.active = torch.ones(len(generators), dtype=torch.bool)  # (B,)

    def initialize_canvas(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        assert batch_size == len(self.generators), f"{len(self.generators)} generators for a batch of {batch_size}"
        canvas = torch.zeros(batch_size, self.canvas_length, dtype=torch.long, device=device)
        for b in torch.nonzero(self.active).flatten().tolist():
            canvas[b] = torch.randint(0, self.vocab_size, (self.canvas_length,), generator=self.generators[b], device=device)
        return canvas

    def sample(self, probs: torch.Tensor) -> torch.LongTensor:
        """One token per canvas position from `probs` (B, C, V), for active rows; inactive rows get 0."""
        if self.greedy:
            return probs.argmax(-1) * self.active[:, None].to(probs.device)
        out = torch.zeros(probs.shape[:2], dtype=torch.long, device=probs.device)
        for b in torch.nonzero(self.active).flatten().tolist():
            out[b] = torch.multinomial(probs[b], num_samples=1, generator=self.generators[b]).squeeze(-1)
        return out


def choose_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_p: float,
    top_k: int,
    generator: torch.Generator,
) -> torch.LongTensor:
    """AR token choice for one row: logits (L, V) -> tokens (L,). Greedy when temperature is under
    GREEDY_BELOW: dividing by a near-zero temperature overflows to inf, and softmax to nan."""
    if temperature < GREEDY_BELOW:
        return logits.argmax(-1)
    scores = TemperatureLogitsWarper(temperature)(None, logits)
    if top_k > 0:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    probs = torch.softmax(scores, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
