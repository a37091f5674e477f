"""The mixture-of-experts path a compiled call runs: a fixed graph of a few operators whatever the routing.

transformers' `grouped_mm` experts path sorts the call's (token, expert) pairs and runs one GEMM per
expert over its rows. On CUDA that is one kernel; on the CPU torch's grouped GEMM loops over the
experts in C++, one `mm` (with its slicing) per expert: ~1,400 operator dispatches per call at the
26B-A4B shapes (128 experts, 2 layers), four fifths of a compiled call's dispatches. Two paths with
no sort, no group offsets and no host read, each a few operators per layer, take the calls they suit:

- gathered (transformers' `batched_mm`): each (token, expert) pair's weights gathered and applied as
  one batched GEMM. It moves about three matrices per pair (gather: read and write; GEMM: read),
  so it serves calls with few pairs: an AR step at batch 1 touches 8 of 128 experts, and reading
  all 128 (the dense path) would cost 16x the weight traffic of the step's experts.
- dense: every expert over every token as two batched GEMMs, the outputs weighed by the router's
  weights scattered to (tokens, experts), zero where a token did not pick an expert. It reads each
  expert once and costs `num_experts / top_k` times the grouped path's FLOPs, so it serves calls
  that touch every expert anyway and are small: a CPU's 16-token canvas, verified's check.
- grouped (transformers'): anything bigger, e.g. a GPU's 256-token canvas (32,768 rows at 128
  experts), where the dense FLOPs would dominate; `scripts/gpu/check.sh` measures dense there too.

The choice is a shape guard under `torch.compile` (each side its own graph). Outputs equal the
grouped path's up to float summation order (an unpicked expert adds `0 * y`); `tandem bench engines
--compile-compare` checks the compiled path's tokens against eager's.
"""

from __future__ import annotations

import torch
from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS, batched_mm_experts_forward, grouped_mm_experts_forward

DENSE_MAX_ROWS = 4096  # tokens x experts: the CPU bench's 26B-A4B canvas (16 x 128 = 2,048), an AR batch of 32
GATHER_COST = 3  # weight matrices the gathered path moves per (token, expert) pair, against one per expert dense
NAME = "tandem"  # the experts implementation compile_model sets (transformers' ExpertsInterface key)


def dense_experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    """Every expert over every token, weighted by the router (zero for experts a token did not pick).
    `self` is the library's experts module: gate_up_proj (E, 2I, H), down_proj (E, H, I)."""
    tokens, hidden = hidden_states.shape
    weights = torch.zeros(tokens, self.num_experts, dtype=top_k_weights.dtype, device=hidden_states.device)
    weights = weights.scatter(1, top_k_index, top_k_weights)  # (T, E); a token picks an expert at most once
    x = hidden_states.unsqueeze(0).expand(self.num_experts, tokens, hidden)
    gate_up = torch.bmm(x, self.gate_up_proj.transpose(1, 2))  # (E, T, 2I)
    out = torch.bmm(self._apply_gate(gate_up), self.down_proj.transpose(1, 2))  # (E, T, H)
    return torch.einsum("te,eth->th", weights.to(out.dtype), out).to(hidden_states.dtype)


def experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                    top_k_weights: torch.Tensor) -> torch.Tensor:
    """Gathered for a few pairs, dense while the call is small, grouped beyond (see module doc)."""
    tokens = hidden_states.shape[0]
    if GATHER_COST * tokens * top_k_index.shape[-1] <= self.num_experts:
        return batched_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    if tokens * self.num_experts <= DENSE_MAX_ROWS:
        return dense_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    return grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)


def supported(model) -> bool:
    """Whether `model`'s experts have the layout the dense path reads (gated, concatenated, not
    transposed, no biases or post norm: DiffusionGemma's)."""
    for module in model.modules():
        if hasattr(module, "gate_up_proj") and hasattr(module, "down_proj"):
            if not module.has_gate or module.has_bias or module.is_transposed or module.has_post_expert_norm:
                return False
    return True


def use_tandem_experts(model, on: bool) -> None:
    """Switch `model`'s experts between this module's path and transformers' grouped one."""
    if on and not supported(model):
        return
    model.set_experts_implementation(NAME if on else "grouped_mm")


ALL_EXPERTS_FUNCTIONS.register(NAME, experts_forward)
