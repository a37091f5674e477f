"""Compiled model calls: the canvas pass (one denoising step's decoder call, in block mode, seeded
canvases and verified's drafts) runs through `torch.compile`; the eager model is the reference.

`compile_model(model, how)` replaces the decoder's `forward` with a compiled version of itself,
in place, so every decode mode uses it without knowing; `use_eager` switches back (the bench
alternates the two on one copy of the weights). Shapes are marked dynamic, and torch still
specializes some: a batch or canvas of one, a canvas size, the cache's strides, whether the step
has a self-conditioning signal and whether the attention mask is needed. Each variant is compiled
on first use (10-60 s on a 2-core CPU; inductor's on-disk FX graph cache makes a restart on the
same machine cheap), and past torch's recompile limit (8) a new variant runs eager. A static KV
cache with fixed-address per-step state, padded to shape buckets, is what bounds the variants;
until it lands, compiling is opt-in.

The encoder's call (prefill, commit, AR steps) is not compiled: over transformers' DynamicCache its
inputs change shape and strides every AR step, and it hit the recompile limit within two batches
(measured with TORCH_LOGS=recompiles).

`how`: "off" (eager), "on" (compile), "auto" (compile on CUDA devices, where a step is launch-bound:
eager spends 74-121 ms around 31 ms of kernels (shared/readings/gpu-2026-12-04.md); eager on CPUs).
`tandem bench engines --compile-compare` measures both paths side by side.

The mixture-of-experts layers keep transformers' `grouped_mm` experts path, which compiles as one
custom op on the CPU; `batched_mm` (static shapes, no host sync) measured 7x slower in eager on
this CPU at canvas 256, because it gathers every token's expert weights.
"""

from __future__ import annotations

import torch

from engines.canvas_step import settle
from engines.static_batch import use_slot_cache

COMPILE_CHOICES = ("off", "on", "auto")
RECOMPILE_LIMIT = 24  # compiled variants per model call before torch falls back to eager for a new one


def compiled_calls(model) -> tuple:
    """The model calls that are compiled: the encoder's (prefill, commit, an AR step) and the
    decoder's (a canvas step)."""
    return (model.model.encoder, model.model.decoder)


def should_compile(how: str, device: torch.device | str) -> bool:
    assert how in COMPILE_CHOICES, f"compile must be one of {COMPILE_CHOICES}, got {how!r}"
    if how == "auto":
        return torch.device(device).type == "cuda"
    return how == "on"


def compile_model(model, how: str = "auto") -> bool:
    """Compile `model`'s encoder and decoder calls in place if `how` says so (see module doc).
    Returns whether they are compiled. Calling it again on a compiled model changes nothing."""
    if not should_compile(how, model.device):
        return False
    mode = "reduce-overhead" if model.device.type == "cuda" else None
    # Each call compiles a few variants: a batch of one and a batch of several, one token (an AR
    # step) and several (prefill, commit, verified's check), whether the step has a self-conditioning
    # signal; torch's default limit (8 per function) is reached by the three modes together.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    # A batch (or token width) of one is compiled as one more size, not as its own graph: torch
    # otherwise specializes sizes 0 and 1, and every call would compile twice (10-70 s each here).
    torch.fx.experimental._config.backed_size_oblivious = True
    for module in compiled_calls(model):
        if not hasattr(module, "_tandem_eager_forward"):
            module._tandem_eager_forward = module.forward
            module._tandem_compiled_forward = torch.compile(module.forward, dynamic=True, mode=mode)
        module.forward = module._tandem_compiled_forward
    use_slot_cache(model, True)
    return True


def use_eager(model) -> None:
    """Back to the eager calls (the compiled ones are kept: `compile_model` switches back for free).
    What `tandem bench engines --compile-compare` alternates with, on one copy of the weights."""
    for module in compiled_calls(model):
        if hasattr(module, "_tandem_eager_forward"):
            module.forward = module._tandem_eager_forward
    use_slot_cache(model, False)


def is_compiled(model) -> bool:
    decoder = model.model.decoder
    return hasattr(decoder, "_tandem_compiled_forward") and decoder.forward == decoder._tandem_compiled_forward


_compiled_settle = None


def step_function(model):
    """What a denoising step runs after its decoder call and draws (`engines.canvas_step.settle`):
    compiled where the model's calls are, as one more compiled call per step."""
    global _compiled_settle
    if not is_compiled(model):
        return settle
    if _compiled_settle is None:
        mode = "reduce-overhead" if model.device.type == "cuda" else None
        _compiled_settle = torch.compile(settle, dynamic=True, mode=mode)
    return _compiled_settle
