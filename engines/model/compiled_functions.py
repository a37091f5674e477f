"""Functions of tensors that run compiled where a model's calls are (`engines.batch.compiled`).

Besides the encoder's and decoder's own calls, three pieces of a step are plain functions of
tensors: the logits head after an encoder call (the tied `lm_head` and the soft cap,
`engines.model.logits.soft_capped_logits`), a canvas step's decoder call together with its head
(`engines.batch.static_batch.decoder_logits`: one compiled call per canvas step instead of two) and the
denoising step's work after its draws (`engines.model.settle.settle`). On a compiled model each runs
as one compiled call (the cap's divide, tanh and multiply fused over the logits instead of three
passes); on an eager one, as itself. One compiled version per function serves every engine in the
process, so a second engine on the same shapes reuses the first one's graphs.

Apart from `engines.batch.compiled` because the batch layouts call these and `engines.batch.compiled` switches
the layouts.
"""

from __future__ import annotations

from typing import Callable

import torch

_versions: dict[Callable, Callable] = {}


def is_compiled(model) -> bool:
    """Whether `model`'s calls are compiled (`engines.batch.compiled.compile_model`) right now."""
    decoder = model.model.decoder
    return hasattr(decoder, "_tandem_compiled_forward") and decoder.forward == decoder._tandem_compiled_forward


def compiled_version(model, fn: Callable) -> Callable:
    """`fn` compiled if `model`'s calls are (CUDA graphs on CUDA, as the model's calls), else `fn`."""
    if not is_compiled(model):
        return fn
    if fn not in _versions:
        mode = "reduce-overhead" if model.device.type == "cuda" else None
        _versions[fn] = torch.compile(fn, dynamic=True, mode=mode)
    return _versions[fn]
