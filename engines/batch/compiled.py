"""Compiled model calls: the encoder (prefill, commit, AR steps, verified's check), the decoder
(a canvas step) and a denoising step's work after its draws (`engines.model.settle.settle`) run
through `torch.compile`; the eager model over transformers' DynamicCache is the reference.

`compile_model(model, how)` replaces the encoder's and decoder's `forward` with compiled versions
of themselves, in place, and switches the model's batches to the slot cache
(`engines.batch.static_batch`): fixed-size KV buffers written in place, masks built from device tensors,
so a call's inputs keep their shapes between row changes and bucket growth instead of growing
every AR step (over DynamicCache the encoder hit torch's recompile limit within two batches).
`use_eager` switches back to both eager calls and the dynamic cache (the bench alternates the two
on one copy of the weights). Shapes are dynamic, so each call compiles a few variants per replica:
a batch of one or several, one token or several (an AR step; prefill, commit and verified's
check), and whatever torch guards on beyond that. Each
compiles on first use (10-70 s on a 2-core CPU); inductor's on-disk FX graph cache makes a restart
on the same machine cheap.

`how`: "off" (eager), "on" (compile), "auto" (compile on CUDA devices, where a step is launch-bound:
eager spends 74-121 ms around 31 ms of kernels (shared/readings/gpu-2026-12-04.md); eager on CPUs).
`tandem bench engines --compile-compare` measures both paths side by side.

A compiled model's mixture-of-experts layers take `engines.model.experts`' paths (gathered weights for an
AR step's few pairs, every expert dense for a small call, transformers' grouped GEMM beyond), each a
fixed graph of a few operators where the grouped GEMM's CPU kernel loops over the experts; the
eager reference keeps transformers' grouped path. The logits head and the step's `settle` compile
too (`engines.model.compiled_functions`); at a small vocabulary on a CPU a block step's draw joins `settle`
in its compiled call (`engines.model.settle.sample_and_settle`, the races' 64-bit draws made on the
host from each row's generator, finished inside: `engines.model.logits.exponentials_from_bits`).
"""

from __future__ import annotations

import functools

import torch

from engines.model.settle import settle
from engines.model.compiled_functions import compiled_version, is_compiled  # noqa: F401 - is_compiled: part of this module's face
from engines.model.experts import use_tandem_experts
from engines.batch.static_batch import use_slot_cache

COMPILE_CHOICES = ("off", "on", "auto")
RECOMPILE_LIMIT = 24  # compiled variants per model call before torch falls back to eager for a new one


def compiled_calls(model) -> tuple:
    """The model calls that are compiled: the encoder's (prefill, commit, an AR step) and the
    decoder's (a canvas step)."""
    return (model.model.encoder, model.model.decoder)


# One function per compiled call: torch caches compiled code per Python function, and the library's
# forwards share one decorator's wrapper, so compiling them directly put the encoder's and the
# decoder's variants under one recompile limit.
def _run_encoder(module, **kwargs):
    return module._tandem_eager_forward(**kwargs)


def _run_decoder(module, **kwargs):
    return module._tandem_eager_forward(**kwargs)


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
    # Sizes of one stay specialized (a batch of one, one token: its own variant). Treating them as
    # any other size (torch.fx.experimental._config.backed_size_oblivious) halves the variants but
    # changed a greedy AR answer at batch 1 against the eager reference (measured): not taken.
    for module, runner in zip(compiled_calls(model), (_run_encoder, _run_decoder)):
        if not hasattr(module, "_tandem_eager_forward"):
            module._tandem_eager_forward = module.forward
            module._tandem_compiled_forward = functools.partial(torch.compile(runner, dynamic=True, mode=mode), module)
        module.forward = module._tandem_compiled_forward
    use_slot_cache(model, True)
    use_tandem_experts(model, True)
    return True


def use_eager(model) -> None:
    """Back to the eager calls (the compiled ones are kept: `compile_model` switches back for free).
    What `tandem bench engines --compile-compare` alternates with, on one copy of the weights."""
    for module in compiled_calls(model):
        if hasattr(module, "_tandem_eager_forward"):
            module.forward = module._tandem_eager_forward
    use_slot_cache(model, False)
    use_tandem_experts(model, False)


def step_function(model):
    """What a denoising step runs after its decoder call and draws (`engines.model.settle.settle`):
    compiled where the model's calls are, as one more compiled call per step."""
    return compiled_version(model, settle)
