"""FP8 weights (`engine.quantization: fp8`) through torchao's float8 tensors.

`quantize_weights(model, "fp8")` stores, in place, every linear layer's weight and the mixture-of-
experts' stacked expert weights as float8 e4m3 with one scale per output row (per expert and row):
a quarter of float32's bytes, half of bfloat16's. What runs on them:
- on a GPU with FP8 tensor cores (compute capability 8.9 and up: L4, H100, H200), the linear layers
  take torchao's dynamic FP8 activations and FP8 GEMMs (`Float8DynamicActivationFloat8WeightConfig`);
- elsewhere (CPUs, older GPUs) weight-only: each call dequantizes its weight to the activations' dtype
  (`Float8WeightOnlyConfig`), so the weights' memory halves or quarters at the same arithmetic.
The experts are weight-only everywhere (torchao's FP8 grouped GEMM needs its optional kernels); the
embeddings and the head (tied to them) keep the model's dtype. Quantized under inference mode: the
engine decodes there, and a float8 tensor made outside it refused to be transposed inside it.
torchao is an optional dependency (`pip install 'tandem[fp8]'`; `scripts/gpu/wheels.sh` carries it).
"""

from __future__ import annotations

import torch

QUANTIZATIONS = ("none", "fp8")


def quantize_weights(model, how: str) -> None:
    """Quantize `model`'s weights in place (`how`: "none" leaves them)."""
    if how not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {QUANTIZATIONS}, not {how!r}")
    if how == "none":
        return
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, Float8Tensor, Float8WeightOnlyConfig, quantize_
        from torchao.quantization.granularity import PerRow
    except ImportError as exc:
        raise RuntimeError("quantization fp8 needs torchao: pip install 'tandem[fp8]'") from exc
    config = Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()) if fp8_gemms(model.device) else Float8WeightOnlyConfig()
    head = model.get_output_embeddings()
    # The decoder's layers share the encoder's weights (one model, two calls): each shared weight is
    # quantized once and stays shared, as torchao alone would quantize it once per module.
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head]
    sharing = {m: id(m.weight) for m in linear}
    with torch.inference_mode():
        quantize_(model, config, filter_fn=lambda module, _: module in sharing)
        first: dict[int, torch.nn.Parameter] = {}
        for module, key in sharing.items():
            module.weight = first.setdefault(key, module.weight)
        for path, module in model.named_modules():
            if not path.endswith(".experts"):
                continue
            for name, weight in list(module.named_parameters(recurse=False)):
                if weight.ndim == 3:  # (experts, out, in)
                    if id(weight) not in first:
                        first[id(weight)] = torch.nn.Parameter(Float8Tensor.from_hp(weight.data, granularity=PerRow()), requires_grad=False)
                    setattr(module, name, first[id(weight)])


def fp8_gemms(device: torch.device) -> bool:
    """Whether `device` multiplies in FP8 (CUDA compute capability 8.9 and up)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def weight_bytes(model) -> dict[str, int]:
    """Bytes the model's parameters hold, float8 ones (data and scales) apart from the rest."""
    out = {"float8": 0, "other": 0}
    for p in model.parameters():
        if hasattr(p, "qdata"):
            out["float8"] += p.qdata.nbytes + p.scale.nbytes
        else:
            out["other"] += p.nbytes
    return out
