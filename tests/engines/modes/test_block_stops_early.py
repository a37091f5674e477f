"""Block mode equals transformers' DiffusionGemma `generate()` where rows stop early.

The tiny random model of tests/engines/modes/test_block.py never becomes confident, so every canvas
there runs all its steps and the stop rule (stable argmax canvas, mean entropy under the confidence
threshold: `engines.model.settle`) is never exercised. The shipped checkpoint's answers stop after a
few of their 12 steps, at different steps per request: on them the engine's tokens must be the
library's, token for token, alone and in a batch whose rows stop at different steps.

Seen red (docs/operations.md section 7): the confidence threshold x4 in `settle`, `mean` -> `amax`
in the stop rule, and the stability check dropped (a confident canvas stops before it is stable)."""

from __future__ import annotations

import pytest
import torch

from engines import DiffusionEngine, GenerationRequest
from engines.defaults import SHIPPED_CHECKPOINT
from lab.model.evaluate import item_prompt
from lab.model.tasks import generate_suite

FAMILIES = ("classify", "summarize", "code", "extract", "plan", "write")
PER_FAMILY = 2  # 12 requests: the first 2 test items of each family (write's and plan's long answers stop
# at mean entropies near the confidence threshold: they catch a threshold off by a factor)
STEPS = 12  # the shipped generation config's max_denoising_steps


@pytest.fixture(scope="module")
def shipped():
    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT)


@pytest.fixture(scope="module")
def requests(shipped) -> list[GenerationRequest]:
    """One full canvas each (the library decodes `config.canvas_length`), a seed per request."""
    items = [item for family in FAMILIES for item in generate_suite(PER_FAMILY, split="test", seed=0, families=(family,))]
    canvas = shipped.config.canvas_length
    return [GenerationRequest(**item_prompt(item), mode="block", seed=i, max_new_tokens=canvas, max_denoising_steps=STEPS)
            for i, item in enumerate(items)]


def library_generate(engine, request: GenerationRequest) -> tuple[list[int], int]:
    """transformers' `generate()` at batch 1 with the request's seed: its tokens cut at the first eos,
    and its denoising steps (decoder passes: the tokens it counts, up to the first eos, over its
    tokens per forward). A stop one step early or late can leave the tokens as they are: the steps
    are compared too."""
    ids = engine.prompt_ids(request)
    torch.manual_seed(request.seed)
    out = engine.model.generate(torch.tensor([ids]), max_new_tokens=request.max_new_tokens, max_denoising_steps=request.max_denoising_steps)
    tokens = out.sequences[0, len(ids):].tolist()
    cut = next((i for i, t in enumerate(tokens) if t in engine.eos_ids), len(tokens))
    counted = int((out.sequences[0, len(ids):] != engine.model.generation_config.pad_token_id).sum())
    return tokens[:cut], round(counted / float(out.tokens_per_forward[0]))


@pytest.fixture(scope="module")
def reference(shipped, requests) -> list[tuple[list[int], int]]:
    return [library_generate(shipped, r) for r in requests]


def test_the_shipped_requests_stop_early_at_different_steps(shipped, requests):
    """The premise: these requests exercise the stop rule (else the tests below check what
    test_block.py already does)."""
    steps = [r.stats.steps_per_canvas[0] for r in shipped.generate_batch(requests)]
    assert max(steps) < STEPS and len(set(steps)) > 1, steps


def test_identical_tokens_to_library_generate_at_batch_1(shipped, requests, reference):
    got = [(r.token_ids, r.stats.decoder_calls) for r in map(shipped.generate, requests)]
    differs = [i for i, (g, want) in enumerate(zip(got, reference)) if g != want]
    assert not differs, f"requests {differs} of {len(requests)} differ from generate()"


@pytest.mark.parametrize("batch", [4, 12])
def test_identical_tokens_to_library_generate_in_mixed_batches(shipped, requests, reference, batch):
    """Batches that mix families (rows stopping at different steps leave the computed batch): each
    row writes the library's tokens for its request alone, in as many steps."""
    order = sorted(range(len(requests)), key=lambda i: (i % PER_FAMILY, i))  # families interleaved
    mixed, want = [requests[i] for i in order], [reference[i] for i in order]
    got = [(r.token_ids, r.stats.decoder_calls) for start in range(0, len(mixed), batch) for r in shipped.generate_batch(mixed[start:start + batch])]
    differs = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not differs, f"rows {differs} of {len(mixed)} (batches of {batch}) differ from generate()"
