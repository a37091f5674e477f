"""Block mode's step defaults and the eos/pad ids a checkpoint's generation config needs: a freshly built model
has an empty one (`generate()` falls back to 48 steps and no end-of-sequence), so every checkpoint this project
writes carries these, and loading fills them in for one that lacks them."""

from __future__ import annotations

from transformers import DiffusionGemmaConfig
from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
    DiffusionGemmaGenerationConfig,
    EntropyBoundSamplerConfig,
)


def default_generation_config(config: DiffusionGemmaConfig, **overrides) -> DiffusionGemmaGenerationConfig:
    """Step defaults for block mode plus the eos/pad ids from the model config."""
    text = config.text_config
    params = dict(
        max_new_tokens=config.canvas_length,
        max_denoising_steps=12,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        eos_token_id=text.eos_token_id,
        pad_token_id=text.pad_token_id,
        bos_token_id=text.bos_token_id,
    )
    params.update(overrides)
    return DiffusionGemmaGenerationConfig(**params)
