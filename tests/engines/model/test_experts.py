"""engines.model.experts: the dense mixture-of-experts path a compiled call runs, against transformers'
grouped path on the same weights (a narrow model of the 26B-A4B layout: many experts, top-k of them)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from transformers.integrations.moe import grouped_mm_experts_forward

from engines.model import experts
from lab.model.shapes import build_random_model, shape_config

NARROW = dict(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_experts=16, top_k_experts=4,
              vocab_size=512)


@pytest.fixture(scope="module")
def model():
    return build_random_model(shape_config("26b-a4b", 1, **NARROW), torch.float32, "cpu")


@pytest.fixture(scope="module")
def module(model):
    return next(m for m in model.modules() if hasattr(m, "gate_up_proj"))


@torch.no_grad()
def routed(module, tokens: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, module.hidden_dim, generator=g)
    picks = torch.stack([torch.randperm(module.num_experts, generator=g)[:NARROW["top_k_experts"]] for _ in range(tokens)])
    weights = torch.softmax(torch.randn(tokens, NARROW["top_k_experts"], generator=g), dim=-1)
    return x, picks, weights


def assert_same(got, want):
    """Equal up to float summation order, relative to the outputs' size (random weights make them small)."""
    scale = want.abs().max().item()
    assert scale > 0, "the experts wrote something to compare"
    assert (got - want).abs().max().item() <= 1e-4 * scale


def aten_ops(fn) -> set[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("tokens", [1, 7, 64])
def test_dense_experts_give_the_grouped_outputs(module, tokens):
    x, picks, weights = routed(module, tokens, seed=tokens)
    want = grouped_mm_experts_forward(module, x, picks, weights)
    got = experts.dense_experts_forward(module, x, picks, weights)
    assert_same(got, want)


def test_each_call_takes_the_path_its_size_suits(module):
    """A few (token, expert) pairs: their weights gathered; a small call: dense; a big one: grouped.
    The first two sort nothing and read no group offsets (what a captured graph cannot hold), and
    all three give the grouped outputs."""
    k = NARROW["top_k_experts"]
    gathered = routed(module, module.num_experts // (experts.GATHER_COST * k))
    dense = routed(module, module.num_experts // (experts.GATHER_COST * k) + 1)
    biggest_dense = routed(module, experts.DENSE_MAX_ROWS // module.num_experts)
    grouped = routed(module, experts.DENSE_MAX_ROWS // module.num_experts + 1)
    ops = {name: aten_ops(lambda call=call: experts.experts_forward(module, *call))
           for name, call in (("gathered", gathered), ("dense", dense), ("biggest_dense", biggest_dense), ("grouped", grouped))}
    assert "aten::repeat_interleave" in ops["gathered"] and "aten::scatter" not in ops["gathered"]
    assert "aten::scatter" in ops["dense"] and "aten::scatter" in ops["biggest_dense"]
    assert "aten::sort" in ops["grouped"]
    assert not any("aten::sort" in ops[name] or "aten::_local_scalar_dense" in ops[name]
                   for name in ("gathered", "dense", "biggest_dense"))
    for call in (gathered, dense, biggest_dense, grouped):
        assert_same(experts.experts_forward(module, *call), grouped_mm_experts_forward(module, *call))


def test_the_switch_sets_and_restores_the_models_experts_path(model):
    experts.use_tandem_experts(model, True)
    try:
        assert model.config.get_text_config()._experts_implementation == experts.NAME
        ids = torch.tensor([[2, 40, 41, 42, 43]])
        with torch.inference_mode():
            dense = model.model.encoder(input_ids=ids).last_hidden_state
    finally:
        experts.use_tandem_experts(model, False)
    assert model.config.get_text_config()._experts_implementation == "grouped_mm"
    with torch.inference_mode():
        grouped = model.model.encoder(input_ids=ids).last_hidden_state
    assert_same(dense, grouped)
