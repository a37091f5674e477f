"""The 26B-A4B shapes (lab/model/configs, lab/model/shapes.py) against the model card's parameter counts."""

import pytest
import torch

from lab.model.shapes import build_random_model, parameter_counts, shape_config


def test_the_reconstruction_has_the_published_parameter_counts():
    """Model card: 25.2 B parameters in total, 3.8 B active per token (built on the meta device: no memory)."""
    counts = parameter_counts(build_random_model(shape_config("26b-a4b"), device="meta"))
    assert counts["total_b"] == pytest.approx(25.2, rel=0.01)
    assert counts["active_b"] == pytest.approx(3.8, rel=0.02)


def test_full_attention_layers_have_the_global_head_shapes():
    model = build_random_model(shape_config("26b-a4b"), device="meta")
    layers = model.model.decoder.layers
    assert [i for i, t in enumerate(model.config.text_config.layer_types) if t == "full_attention"] == [5, 11, 17, 23, 29]
    sliding, full = layers[0].self_attn, layers[5].self_attn
    assert tuple(sliding.q_proj.weight.shape) == (16 * 256, 2816) and tuple(sliding.k_proj.weight.shape) == (8 * 256, 2816)
    assert tuple(full.q_proj.weight.shape) == (16 * 512, 2816) and tuple(full.k_proj.weight.shape) == (2 * 512, 2816)
    assert full.v_proj is None  # keys double as values in full-attention layers
    assert tuple(layers[0].experts.gate_up_proj.shape) == (128, 2 * 704, 2816)


def test_reduced_depth_keeps_a_full_attention_last_layer_and_runs():
    config = shape_config("26b-a4b", layers=2, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                          num_experts=4, top_k_experts=2, vocab_size=512)
    assert config.text_config.layer_types == ["sliding_attention", "full_attention"]
    model = build_random_model(config, dtype=torch.float32)
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight  # tied, as the checkpoint is
    with torch.inference_mode():
        out = model.generate(torch.tensor([[2, 10, 11, 12]]), max_new_tokens=config.canvas_length, max_denoising_steps=2)
    assert out.sequences.shape[1] == 4 + config.canvas_length


def test_an_unknown_shape_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="26b-a4b"):
        shape_config("70b")
