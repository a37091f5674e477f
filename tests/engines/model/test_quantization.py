"""FP8 weights (engines/model/quantization.py, `engine.quantization: fp8`) on this CPU: weight-only float8
through torchao. The linear layers and the stacked expert weights are stored as float8 with a scale
per row, at about a quarter of float32's bytes; the shipped model's next-token choices and its
answers stay those of its float32 weights within a measured margin."""

from __future__ import annotations

import pytest
import torch

from engines import DiffusionEngine
from engines.defaults import SHIPPED_CHECKPOINT
from engines.model.quantization import quantize_weights, weight_bytes
from tests.engines.factories import PROMPTS, chat
from tests.floors import at_least
from tests.measures import fp8_top1


@pytest.fixture(scope="module")
def shipped():
    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT), DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT, quantization="fp8")


def test_fp8_stores_every_linear_and_expert_weight_as_float8_and_the_head_as_it_was(shipped):
    plain, fp8 = shipped
    head = fp8.model.get_output_embeddings()
    linear = [m for m in fp8.model.modules() if isinstance(m, torch.nn.Linear) and m is not head]
    experts = [p for n, p in fp8.model.named_parameters() if ".experts." in n]
    assert linear and experts, "the shipped model has linear layers and experts"
    assert all(hasattr(m.weight, "qdata") and m.weight.qdata.dtype == torch.float8_e4m3fn for m in linear)
    assert all(hasattr(p, "qdata") and p.qdata.dim() == 3 for p in experts)
    assert head.weight.dtype == torch.float32 and not hasattr(head.weight, "qdata"), "the head (tied to the embeddings) stays"
    quantized = {n for n, p in fp8.model.named_parameters() if hasattr(p, "qdata")}
    before = sum(p.nbytes for n, p in plain.model.named_parameters() if n in quantized)
    assert weight_bytes(fp8.model)["float8"] <= 0.3 * before, "float8 data and a float32 scale per row: about a quarter"
    decoder, encoder = fp8.model.model.decoder.layers[0], fp8.model.model.encoder.language_model.layers[0]
    assert decoder.self_attn.q_proj.weight is encoder.self_attn.q_proj.weight, "the decoder still shares the encoder's weights"


def test_fp8_keeps_the_next_token_choices(shipped):
    """Teacher-forced over the test prompts: the most likely next token is float32's at 93 of 96
    positions (tests/floors.py) and the logits move by 3-8% of their spread; greedy answers drift further
    (a changed token changes what follows: tandem/bench/fp8.py reports them)."""
    plain, fp8 = shipped
    agree, total, error = fp8_top1(plain, fp8)
    at_least("fp8 top-1 agreement", agree, of=total)
    assert max(error) < 0.12, error
    answer = fp8.generate(chat(PROMPTS[0], mode="block", max_new_tokens=24))
    assert answer.finish_reason in ("stop", "length") and answer.token_ids, "block mode decodes on float8 weights too"


def test_an_unknown_quantization_is_refused_before_anything_changes(tiny_checkpoint):
    engine = DiffusionEngine.from_checkpoint(tiny_checkpoint)
    with pytest.raises(ValueError, match="quantization must be one of"):
        quantize_weights(engine.model, "int3")
    assert not any(hasattr(p, "qdata") for p in engine.model.parameters())
