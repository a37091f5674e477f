"""Random-weight DiffusionGemma models of a published checkpoint's shapes, for tests and benchmarks.

`lab/model/configs/<name>.yaml` holds a checkpoint's text shapes with the source of every value
(nothing here can download the real config). `shape_config` turns one into a transformers
`DiffusionGemmaConfig`, optionally at reduced depth (the layer pattern kept, the last layer full
attention as the library requires); `build_random_model` makes the model with random weights in a
given dtype, on a device or on the meta device (no memory: for counting parameters).

Text-only: the vision tower is a one-layer stub (DiffusionGemma always builds one), and the token
ids are the library's defaults (pad 0, eos 1, bos 2). No tokenizer comes with these shapes: the
benchmark pairs the model with a small tokenizer and feeds prompts as token ids.
"""

from __future__ import annotations

from pathlib import Path

import torch
import yaml
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion
from transformers.initialization import no_init_weights

CONFIGS = Path(__file__).resolve().parent / "configs"
SHAPES = {"26b-a4b": CONFIGS / "diffusiongemma-26b-a4b.yaml"}


def shape_config(name: str, layers: int | None = None, **text_overrides) -> DiffusionGemmaConfig:
    """The DiffusionGemma config of shape `name` (a key of SHAPES), with `layers` decoder layers
    (all of them by default) and any text-config field overridden."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape {name!r}; known: {sorted(SHAPES)}")
    spec = yaml.safe_load(SHAPES[name].read_text())
    text = dict(spec["text"])
    pattern = text.pop("sliding_window_pattern")
    depth = layers or text["num_hidden_layers"]
    text.update(num_hidden_layers=depth, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    text["layer_types"] = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(depth)]
    text["layer_types"][-1] = "full_attention"  # the library's rule: the last layer attends to everything
    unknown = sorted(set(text_overrides) - set(text) - set(DiffusionGemmaConfig().text_config.to_dict()))
    if unknown:
        raise ValueError(f"not text-config fields of {name!r}: {unknown}")
    text.update(text_overrides)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1, head_dim=16)
    return DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=spec["canvas_length"])


def build_random_model(config: DiffusionGemmaConfig, dtype: torch.dtype = torch.bfloat16, device: str = "cpu",
                       seed: int = 0) -> DiffusionGemmaForBlockDiffusion:
    """A model of `config` in eval mode with small random weights: matrices normal (std 0.02),
    vectors (norm and expert scales) at one, q/k norms at head_dim**-0.25 as the tiny model starts.
    Built with the library's initialisation switched off (it takes minutes for billions of weights
    on a CPU) and filled in place; buffers (embedding scale, rotary tables) are the library's own.
    On `device="meta"` nothing is allocated: for counting parameters."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), no_init_weights():
            model = DiffusionGemmaForBlockDiffusion(config)
    finally:
        torch.set_default_dtype(previous)
    model.tie_weights()  # the library ties the lm_head to the embedding in the initialisation switched off above
    model.eval()
    if device == "meta":
        return model
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02, generator=generator)
            elif name.endswith(("q_norm.weight", "k_norm.weight")):
                p.fill_(p.shape[0] ** -0.25)
            else:
                p.fill_(1.0)
    return model


def parameter_counts(model: DiffusionGemmaForBlockDiffusion) -> dict[str, float]:
    """Parameters of the text model (the embedding counted once: it is tied to the lm_head), and
    those one token uses (the top-k of the experts), in billions."""
    text = model.config.text_config
    seen, total, experts = set(), 0, 0
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen or "vision" in name or "embed_vision" in name:
            continue
        seen.add(id(p))
        total += p.numel()
        if ".experts." in name:
            experts += p.numel()
    active = total - experts + experts * text.top_k_experts // text.num_experts
    return {"total_b": total / 1e9, "active_b": active / 1e9}
