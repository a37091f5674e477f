"""Load a DiffusionGemma checkpoint and its tokenizer from a local directory, offline.

The same path loads the shipped tiny model and a real `google/diffusiongemma-*` checkout.
A freshly built model has an empty generation config (48 steps, no eos/pad); checkpoints
written by this project carry one, and `engines.model.generation.default_generation_config` fills the gaps otherwise.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoTokenizer, DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, PreTrainedTokenizerBase

from engines.errors import CheckpointError
from engines.model.generation import default_generation_config
from engines.model.gemma3 import GEMMA3, LAYOUT_KEY, load_gemma3_layout

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    model: DiffusionGemmaForBlockDiffusion  # in eval mode, on `device`
    tokenizer: PreTrainedTokenizerBase
    path: Path  # the checkpoint's home: its weights, or (an imported one) its adapters and cost profile
    facts: dict = field(default_factory=dict)  # name, parameters, source, sha256: what /admin/stats shows

    @property
    def config(self) -> DiffusionGemmaConfig:
        return self.model.config


@contextmanager
def quiet_transformers(on: bool):
    """transformers' logging at ERROR inside the block when `on`."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    if on:
        hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def resolve_checkpoint(name: str | os.PathLike) -> tuple[Path, Path, Path | None]:
    """(weights directory, home, adapters directory or None) of a checkpoint name (engines.defaults.CHECKPOINT_NAMES)
    or directory. "gemma3-270m" is imported from its package on first use (minutes, once per machine)."""
    from engines.defaults import CHECKPOINTS, SHIPPED_CHECKPOINT
    from engines.model.adapters import has_adapters

    if str(name) == "tiny":
        return SHIPPED_CHECKPOINT, SHIPPED_CHECKPOINT, None
    if str(name) == "gemma3-270m":
        from engines.model.gemma3_import import import_gemma3

        home = CHECKPOINTS / "gemma3-270m"
        return import_gemma3(), home, home if has_adapters(home) else None
    path = Path(name)
    return path, path, path / "adapters" if has_adapters(path / "adapters") else None


def checkpoint_facts(weights: Path, home: Path, adapters: Path | None, model) -> dict:
    """What a replica says it serves: its name, parameter count, where the weights came from, their hash."""
    imported = weights / "import.json"
    facts = json.loads(imported.read_text()) if imported.is_file() else {"source": str(weights), "sha256": None}
    facts = {"name": home.name, "parameters": sum(p.numel() for p in model.parameters()),
             "source": facts["source"], "sha256": facts["sha256"]}
    if adapters is not None:
        meta = adapters / "adapter_meta.json"
        facts["adapters"] = {"path": adapters.name, **(json.loads(meta.read_text()) if meta.is_file() else {})}
    return facts


def load_checkpoint(path: str | os.PathLike, dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    """Load weights (safetensors), config, generation config and tokenizer from a checkpoint directory or name,
    adapters merged; never touches the network."""
    weights, home, adapters = resolve_checkpoint(path)
    loaded = load_directory(weights, dtype, device)
    if adapters is not None:
        from engines.model.adapters import merge_adapters

        loaded.model = merge_adapters(loaded.model, adapters)
    loaded.path = home
    loaded.facts = checkpoint_facts(weights, home, adapters, loaded.model)
    return loaded


def load_directory(path: Path, dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    """One checkpoint directory as it is on disk."""
    if dtype not in DTYPES:
        raise CheckpointError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}", param="dtype")
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {str(path)!r} does not exist", param="checkpoint")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{str(path)!r} has no config.json: not a transformers checkpoint", param="checkpoint")
    config = json.loads(config_file.read_text())
    model_type = config.get("model_type")
    if model_type != "diffusion_gemma":
        raise CheckpointError(
            f"{str(path)!r} holds a {model_type!r} model; Tandem serves 'diffusion_gemma' checkpoints", param="checkpoint"
        )
    if not any(path.glob("*.safetensors")):
        raise CheckpointError(f"{str(path)!r} has no *.safetensors weights", param="checkpoint")
    gemma3 = config.get(LAYOUT_KEY) == GEMMA3  # an imported Gemma 3 (engines.model.gemma3)
    try:
        # the layout's added weights are "unexpected" to the library's loader, which would print a report of them
        with quiet_transformers(gemma3):
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(path, dtype=DTYPES[dtype], local_files_only=True)
        if gemma3:
            load_gemma3_layout(model, path)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"could not load {str(path)!r}: {exc}", param="checkpoint") from exc
    model = model.to(device).eval()
    if model.generation_config.max_denoising_steps is None or model.generation_config.pad_token_id is None:
        model.generation_config = default_generation_config(model.config)
    tokenizer.padding_side = "left"
    return LoadedModel(model=model, tokenizer=tokenizer, path=path)
