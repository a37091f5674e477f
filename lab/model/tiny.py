"""Factories for tests and benchmarks: a tiny *random* DiffusionGemma with a real tokenizer.

Text-only: the vision tower is shrunk to a one-layer stub (DiffusionGemma always builds one).
MoE is mandatory in the class, so the tiny model has two experts, top-1.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerFast

from lab.model.tokenizer import END_OF_IMAGE, END_OF_TURN, IMAGE, START_OF_IMAGE, train_tokenizer

_CORPUS = [
    "The quick brown fox jumps over the lazy dog. Extract the name and the city as JSON.",
    "Alice Smith lives in Paris and works as an engineer at Acme since 2019.",
    "Classify the review: the battery died after two days, terrible. Label: negative.",
    "Add the numbers step by step: 12 + 7 = 19, 19 + 4 = 23, 23 + 30 = 53.",
    "def add(a, b):\n    return a + b\n",
    '{"name": "Bob", "age": 42, "city": "Berlin", "tools": ["search", "calendar"]}',
    "Summarize: the meeting moved to Tuesday; the budget grew by ten percent.",
    "Once upon a time a robot wrote a story about the sea, the wind and a lighthouse.",
]


def tiny_tokenizer(vocab_size: int = 320) -> PreTrainedTokenizerFast:
    return train_tokenizer(_CORPUS * 4, vocab_size=vocab_size, min_frequency=1)


def tiny_config(
    tokenizer: PreTrainedTokenizerFast,
    canvas_length: int = 32,
    hidden_size: int = 64,
    num_layers: int = 2,
    sliding_window: int = 4096,
    max_positions: int = 4096,
    num_heads: int = 2,
    head_dim: int = 32,
    num_kv_heads: int = 1,
) -> DiffusionGemmaConfig:
    """A DiffusionGemma config small enough that a forward takes milliseconds on a CPU."""
    ids = tokenizer.convert_tokens_to_ids
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        global_head_dim=head_dim,
        num_experts=2,
        top_k_experts=1,
        moe_intermediate_size=hidden_size,
        sliding_window=sliding_window,
        max_position_embeddings=max_positions,
        layer_types=["sliding_attention"] * (num_layers - 1) + ["full_attention"],
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=[tokenizer.eos_token_id, ids(END_OF_TURN)],
        bos_token_id=tokenizer.bos_token_id,
    )
    vision = dict(
        model_type="gemma4_vision",
        hidden_size=16,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=16,
    )
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=vision,
        canvas_length=canvas_length,
        image_token_id=ids(IMAGE),
        boi_token_id=ids(START_OF_IMAGE),
        eoi_token_id=ids(END_OF_IMAGE),
    )


def init_qk_norms(model: DiffusionGemmaForBlockDiffusion) -> None:
    """DiffusionGemma attention uses scaling 1.0 and leaves temperature to the q/k RMSNorm weights;
    at 1.0 they make a fresh model's attention logits ~sqrt(head_dim) too sharp. Start them at head_dim**-0.25."""
    for name, module in model.named_modules():
        if name.endswith(("q_norm", "k_norm")) and getattr(module, "weight", None) is not None:
            head_dim = module.weight.shape[0]
            with torch.no_grad():
                module.weight.fill_(head_dim**-0.25)


def build_tiny_model(seed: int = 0, **config_kwargs) -> tuple[DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerFast]:
    """A random tiny DiffusionGemma in eval mode, with a generation config that knows its eos/pad ids."""
    from engines.model.generation import default_generation_config

    tokenizer = tiny_tokenizer()
    config = tiny_config(tokenizer, **config_kwargs)
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    init_qk_norms(model)
    model.generation_config = default_generation_config(config)
    return model, tokenizer


def save_tiny_checkpoint(path: str | Path, seed: int = 0, **config_kwargs) -> Path:
    """Write a tiny random checkpoint (safetensors + config + tokenizer + generation config) to `path`."""
    path = Path(path)
    model, tokenizer = build_tiny_model(seed=seed, **config_kwargs)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
