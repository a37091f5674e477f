"""LoRA adapters (peft) merged into a loaded checkpoint: the embedded Gemma's adaptation, kept apart from the
imported base so that the repository holds megabytes, not the weights.

The encoder and the decoder of a DiffusionGemma share their projection weights, and their adapters differ
(lab/model/adapt.py trains one for each), so the decoder's projections get weights of their own before the
merge: merging in place into a shared tensor would add both adapters to both passes.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

ADAPTER_FILE = "adapter_model.safetensors"


def has_adapters(path: Path | None) -> bool:
    return path is not None and (path / ADAPTER_FILE).is_file()


def untie_decoder_projections(model) -> None:
    """Give every decoder Linear that shares its weight with the encoder a copy of its own."""
    encoder_weights = {id(m.weight) for m in model.model.encoder.modules() if isinstance(m, nn.Linear)}
    for module in model.model.decoder.modules():
        if isinstance(module, nn.Linear) and id(module.weight) in encoder_weights:
            module.weight = nn.Parameter(module.weight.detach().clone(), requires_grad=module.weight.requires_grad)


@torch.no_grad()
def merge_adapters(model, path: Path):
    """`model` with the adapters in `path` merged into its weights (the same model object, adapters gone)."""
    from peft import PeftModel

    untie_decoder_projections(model)
    merged = PeftModel.from_pretrained(model, str(path), is_trainable=False).merge_and_unload()
    return merged.eval()
