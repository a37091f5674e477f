"""The adaptation recipe (lab/model/adapt.py) and its adapters merged at load (engines/model/adapters.py), on the
shipped tiny checkpoint: a few steps write adapters, a run resumes from them, and the merged model computes what
the adapted model computed, in the encoder and in the decoder (whose projections share the encoder's weights:
a merge into the shared tensors would add both adapters to both passes)."""

from __future__ import annotations

import json

import pytest
import torch

from engines.batch.static_batch import open_batch
from engines.model.loading import load_checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def adapted(tmp_path_factory):
    from lab.model.adapt import AdaptConfig, adapt

    out = tmp_path_factory.mktemp("adapt")
    cfg = AdaptConfig(out=str(out), base="tiny", steps=3, rows=2, threads=1, eval_items=1, log_every=1, ar_prob=1.0, lr=1e-2)
    summary = adapt(cfg, log=lambda *_: None)
    return out, cfg, summary


def test_a_run_writes_adapters_and_a_log(adapted):
    out, _, summary = adapted
    assert summary["step"] == 3
    assert (out / "adapter_model.safetensors").is_file() and (out / "best" / "adapter_model.safetensors").is_file()
    assert json.loads((out / "adapter_meta.json").read_text())["step"] == 3
    logged = [json.loads(line) for line in (out / "adapt_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "dec_loss" in r] == [1, 2, 3]
    assert all(r["enc_loss"] > 0 and r["dec_loss"] > 0 for r in logged if "dec_loss" in r)


def test_a_run_resumes_from_its_adapters(adapted):
    from lab.model.adapt import adapt

    out, cfg, _ = adapted
    lines = []
    summary = adapt(cfg.__class__(**{**cfg.__dict__, "steps": 4}), log=lines.append)
    assert summary["step"] == 4 and any("resumed" in line and "step 3" in line for line in lines)


def _logits(model, prompt: list[int], canvas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch = open_batch(model, 1)
    ar = batch.encode(torch.tensor([prompt]), logits="all")
    return ar, batch.denoise(canvas, None)


def test_merged_adapters_compute_what_the_adapted_model_computed(adapted):
    from peft import PeftModel

    from engines.model.adapters import merge_adapters

    out = adapted[0]
    prompt, canvas = list(range(5, 25)), torch.randint(5, 200, (1, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        base = load_checkpoint("tiny").model
        plain = _logits(base, prompt, canvas)
        peft = PeftModel.from_pretrained(load_checkpoint("tiny").model, str(out)).eval()
        expected = _logits(peft.base_model.model, prompt, canvas)
        merged = merge_adapters(load_checkpoint("tiny").model, out)
        got = _logits(merged, prompt, canvas)
    for pass_name, want, have, before in zip(("encoder", "decoder"), expected, got, plain):
        assert (want - before).abs().max() > 1e-3, f"the adapters change nothing in the {pass_name}: nothing to check"
        assert torch.allclose(want, have, atol=1e-4), f"{pass_name}: merged differs from adapted by {(want - have).abs().max():.2e}"
