import json

import pytest

from engines import CheckpointError, DiffusionEngine, load_checkpoint


def test_loads_weights_tokenizer_and_generation_config(tiny_checkpoint):
    loaded = load_checkpoint(tiny_checkpoint)
    assert loaded.model.config.model_type == "diffusion_gemma"
    assert not loaded.model.training
    gen = loaded.model.generation_config
    assert gen.pad_token_id == loaded.tokenizer.pad_token_id
    assert loaded.tokenizer.eos_token_id in gen.eos_token_id
    assert gen.max_denoising_steps == 12
    assert loaded.tokenizer.padding_side == "left"


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")


def test_directory_without_config_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        load_checkpoint(tmp_path)


def test_other_model_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(CheckpointError, match="'llama'"):
        load_checkpoint(tmp_path)


def test_missing_weights_are_refused(tmp_path, tiny_checkpoint):
    (tmp_path / "config.json").write_text((tiny_checkpoint / "config.json").read_text())
    with pytest.raises(CheckpointError, match="safetensors"):
        load_checkpoint(tmp_path)


def test_unknown_dtype_names_the_choices(tiny_checkpoint):
    with pytest.raises(CheckpointError, match="float32"):
        load_checkpoint(tiny_checkpoint, dtype="int3")


def test_engine_from_checkpoint(tiny_checkpoint):
    engine = DiffusionEngine.from_checkpoint(tiny_checkpoint)
    assert engine.config.canvas_length == 32
    assert engine.eos_ids == frozenset({engine.tokenizer.eos_token_id, engine.tokenizer.convert_tokens_to_ids("<end_of_turn>")})
