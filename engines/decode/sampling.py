"""Token choice for every mode, on per-request random generators.

Each request owns a `torch.Generator` seeded from its `seed`, and every random draw for a row
comes from that row's generator only. So a request decodes to the same tokens alone or in any
batch, and at batch 1 the draws happen in the same order as in transformers' `generate()`.

- Block mode follows the library's `EntropyBoundSampler` (accept/renoise),
  `LinearTemperatureScheduleLogitsProcessor` and `StableAndConfidentStoppingCriteria`; canvas noise
  and token draws are per row, and the entropies the sampler and the stop rule both read are computed
  once per step, slice by slice (`engines.model.logits`), instead of once each over the whole (B, C, V).
- AR and verified modes use the library's temperature / top-k / top-p logits warpers.
"""

from __future__ import annotations

import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    EntropyBoundSampler,
    EntropyBoundSamplerConfig,
    StableAndConfidentStoppingCriteria,
)

from engines.model.logits import sample_tokens, slices

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
        # Host-side: rows still denoising as of the last read of the stop flags (engines.modes.block.StopFlags).
        # A list, not a device tensor, so choosing who draws never reads the device inside a step.
        self.active: list[bool] = [True] * len(generators)

    def initialize_canvas(self, batch_size: int, device: torch.device) -> torch.LongTensor:
        assert batch_size == len(self.generators), f"{len(self.generators)} generators for a batch of {batch_size}"
        canvas = torch.zeros(batch_size, self.canvas_length, dtype=torch.long, device=device)
        for b in active_rows(self.active):
            canvas[b] = torch.randint(0, self.vocab_size, (self.canvas_length,), generator=self.generators[b], device=device)
        return canvas

    def sample(self, logits: torch.Tensor) -> torch.LongTensor:
        """One token per canvas position from the step's logits (B, C, V) as the library draws it
        (`multinomial` over their softmax), for active rows; inactive rows get 0."""
        out = torch.zeros(logits.shape[:2], dtype=torch.long, device=logits.device)
        for b in active_rows(self.active):
            out[b] = sample_tokens(logits[b], self.generators[b], self.greedy)
        return out

    def race_bits(self, logits_shape: torch.Size, device: torch.device) -> torch.Tensor:
        """What `sample` draws, without using it: for each active row, from its (CPU) generator, the
        64-bit draws of its exponential race (C, V), slice by slice as `engines.model.logits.sample_tokens`
        draws them, for a step that finishes them (`engines.model.logits.exponentials_from_bits`) and takes
        `argmax(softmax(logits) / q)` itself (`engines.model.settle.sample_and_settle`). Inactive rows'
        entries are left unset: their rows are held. Twice a logits tensor's bytes (int64)."""
        bits = torch.empty(logits_shape, dtype=torch.int64, device=device)
        for b in active_rows(self.active):
            for start, end in slices(*logits_shape[1:]):
                bits[b, start:end].random_(generator=self.generators[b])
        return bits

    def accept_by_entropy(self, current: torch.LongTensor, sampled: torch.LongTensor, entropy: torch.Tensor) -> torch.LongTensor:
        """The library's `accept_canvas` given the positions' entropies (B, C): accept the k
        lowest-entropy positions with sum - max <= the entropy bound; the rest keep `current`."""
        ordered, order = torch.sort(entropy, dim=-1, descending=False)
        chosen = torch.cumsum(ordered, dim=-1) - ordered <= self.entropy_bound
        self.accepted_token_mask = torch.scatter(torch.zeros_like(chosen), -1, order, chosen)
        return torch.where(self.accepted_token_mask, sampled, current)


def active_rows(active: list[bool]) -> list[int]:
    """Indices of the rows marked active (a host-side list: no device read)."""
    return [b for b, on in enumerate(active) if on]


class StableAndConfident(StableAndConfidentStoppingCriteria):
    """The library's stop rule (the argmax canvas unchanged for `stability_threshold` steps and a
    mean entropy under `confidence_threshold`) given the step's mean entropy per row (B,), which the
    caller has already computed for the sampler."""

    def __call__(self, argmax_canvas: torch.LongTensor, mean_entropy: torch.Tensor) -> torch.BoolTensor:
        if self.stability_threshold == 0:
            stable = torch.ones(argmax_canvas.shape[0], dtype=torch.bool, device=argmax_canvas.device)
        else:
            if self.argmax_canvas_history is None:
                self.argmax_canvas_history = torch.full((self.stability_threshold, *argmax_canvas.shape), -1,
                                                        dtype=argmax_canvas.dtype, device=argmax_canvas.device)
            stable = (self.argmax_canvas_history == argmax_canvas[None]).all(dim=-1).all(dim=0)
            self.argmax_canvas_history = torch.roll(self.argmax_canvas_history, shifts=-1, dims=0)
            self.argmax_canvas_history[-1] = argmax_canvas
        return stable & (mean_entropy < self.confidence_threshold)


def schedule_temperature(t_min: float, t_max: float, steps: int, remaining: int) -> float:
    """`LinearTemperatureScheduleLogitsProcessor`'s temperature with `remaining` of `steps` steps
    left; the step divides its logits by it in place."""
    return t_min + (t_max - t_min) * (remaining / steps)


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
