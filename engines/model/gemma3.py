"""Gemma 3 weights inside a DiffusionGemma: the few places where the two architectures differ.

DiffusionGemma's layers are Gemma 4's; an imported Gemma 3 (engines.model.gemma3_import) is exact
in AR once these differences are handled. Most are folded into the weights when importing:

| Gemma 3                                  | DiffusionGemma                            | handled                          |
|------------------------------------------|-------------------------------------------|----------------------------------|
| RMSNorm `x̂ (1 + w)`                      | `x̂ w`                                     | weights: GGUF stores `1 + w`     |
| scores scaled by `query_pre_attn_scalar**-0.5` | scale 1.0 after `q_norm`            | weights: folded into `q_norm`    |
| no mixture of experts                    | a mixture in every layer (mandatory)      | weights: its output norm at 0, and code: `InertExperts` |
| final logits not soft-capped             | soft-capped at 30                         | config: `final_logit_softcapping: None` |
| full-attention RoPE: default, base 1e6   | "proportional", partial 0.25              | config: default, base 1e6        |

and four cannot be weights, so `apply_gemma3_layout` changes module instances after loading (the
library's classes are untouched):

- values are not normalised in Gemma 3: every `v_norm` (an RMSNorm without a scale) becomes an identity;
- Gemma 3's full-attention layers have their own `v_proj` where DiffusionGemma uses the keys as values
  (K = V); the attention's forward uses a `v_proj` when one is present, so those layers get one, shared
  by the encoder and the decoder as every other weight is;
- Gemma 3 normalises the MLP's output once, DiffusionGemma twice in a row (`post_feedforward_layernorm_1`,
  then the post-norm): the first becomes an identity. (A weight of 1 is not enough: where the MLP's output
  is as small as the norm's epsilon, at the BOS token, normalising twice differs from once by ~1e4 in the
  residual stream.)
- the mixture of experts, whose output is zero, is not computed (`InertExperts`).

A checkpoint written by the importer says `"tandem_layout": "gemma3"` in its config.json;
`engines.model.loading` applies the layout to such a checkpoint, loading the added `v_proj` weights
from its safetensors.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

LAYOUT_KEY = "tandem_layout"  # config.json key naming the layout a checkpoint's weights need
GEMMA3 = "gemma3"


class InertExperts(nn.Module):
    """A mixture of experts that contributes nothing: Gemma 3 has none, and computing a zero costs a step 5-10%."""

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(hidden_states)


def full_attention_layers(model) -> list[int]:
    text = model.config.get_text_config()
    return [i for i, kind in enumerate(text.layer_types) if kind == "full_attention"]


def v_proj_keys(model) -> list[str]:
    """The state-dict names of the `v_proj` weights the layout adds (the encoder's; the decoder shares them)."""
    return [f"model.encoder.language_model.layers.{i}.self_attn.v_proj.weight" for i in full_attention_layers(model)]


def add_v_projections(model, v_proj_weights: dict[str, torch.Tensor] | None = None) -> None:
    """Give the full-attention layers their own `v_proj` (shared by the encoder and the decoder), filled from
    `v_proj_weights` (by `v_proj_keys` name) or freshly initialised. The checkpoint holds these weights."""
    text = model.config.get_text_config()
    param = next(model.parameters())
    for i in full_attention_layers(model):
        enc, dec = model.model.encoder.language_model.layers[i], model.model.decoder.layers[i]
        v_proj = nn.Linear(text.hidden_size, enc.self_attn.k_proj.out_features, bias=False, dtype=param.dtype, device=param.device)
        if v_proj_weights is not None:
            with torch.no_grad():
                v_proj.weight.copy_(v_proj_weights[f"model.encoder.language_model.layers.{i}.self_attn.v_proj.weight"])
        enc.self_attn.v_proj = dec.self_attn.v_proj = v_proj


def apply_gemma3_layout(model, v_proj_weights: dict[str, torch.Tensor] | None = None) -> None:
    """Make `model` compute Gemma 3's layers (see the module docstring): the added `v_proj`s, then the swaps
    of modules that weights cannot express."""
    add_v_projections(model, v_proj_weights)
    for layer in (*model.model.encoder.language_model.layers, *model.model.decoder.layers):
        layer.self_attn.v_norm = nn.Identity()
        layer.post_feedforward_layernorm_1 = nn.Identity()
        layer.experts = InertExperts()


def load_gemma3_layout(model, path: Path) -> None:
    """Apply the layout to a model loaded from the checkpoint directory `path`, reading its added weights."""
    wanted = set(v_proj_keys(model))
    # saving keeps one name of a tied pair, the encoder's or the decoder's
    alias = {key.replace("model.encoder.language_model.", "model.decoder."): key for key in wanted}
    found: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as fh:
            for key in fh.keys():
                if key in wanted or key in alias:
                    found[alias.get(key, key)] = fh.get_tensor(key)
    missing = wanted - set(found)
    if missing:
        raise ValueError(f"{path} says {LAYOUT_KEY}={GEMMA3!r} but lacks {sorted(missing)}")
    apply_gemma3_layout(model, found)


def uses_gemma3_layout(config) -> bool:
    return getattr(config, LAYOUT_KEY, None) == GEMMA3
