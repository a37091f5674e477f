"""Compiled model calls (engines.batch.compiled) against the eager reference: the same tokens in every
mode, with prefix reuse, rows admitted mid-batch and rows cancelled mid-batch; and the stop flags
read every k steps (engines.decode.canvas_settings.StopFlags) cost no host read inside a canvas's steps.

One eager and one compiled engine on the same tiny checkpoint serve the whole module, so the
compile is paid once (shapes are symbolic: batch, cache and canvas changes reuse the graphs)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engines import DiffusionEngine, GenerationRequest
from engines.batch.compiled import compile_model, is_compiled, should_compile
from tests.engines.factories import PROMPTS, chat
from tests.engines.batch.helpers import SYSTEM, requests, run_with_admission_and_cancel

@pytest.fixture(scope="module")
def eager(tiny_checkpoint):
    return DiffusionEngine.from_checkpoint(tiny_checkpoint)


@pytest.fixture(scope="module")
def compiled(tiny_checkpoint):
    engine = DiffusionEngine.from_checkpoint(tiny_checkpoint, compile="on")
    assert engine.compiled and is_compiled(engine.model)
    return engine


# The first compiled call of each mode pays for compiling its variants (encoder, decoder and the
# step's settle: 170 s for block on this 2-core VM under load): longer than the suite's per-test limit.
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["block", "ar", "verified"])
def test_compiled_calls_write_the_eager_tokens(eager, compiled, mode):
    want = [r.token_ids for r in eager.generate_batch(requests(mode))]
    got = [r.token_ids for r in compiled.generate_batch(requests(mode))]
    assert got == want
    assert all(want), "every request wrote tokens"


def test_a_prefix_reused_from_the_cache_gives_the_eager_tokens(eager, compiled):
    def turn(engine, text):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        return engine.generate(GenerationRequest(messages=messages, mode="ar", temperature=0.0, max_new_tokens=16))

    for engine in (eager, compiled):
        engine.prefix_cache.clear()
    first = [turn(e, PROMPTS[0]) for e in (eager, compiled)]
    second = [turn(e, PROMPTS[1]) for e in (eager, compiled)]
    assert first[0].token_ids == first[1].token_ids
    assert second[0].token_ids == second[1].token_ids
    assert second[1].stats.prefix_tokens_reused > 0, "the second turn reused the system prompt's KV"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["ar", "verified"])
def test_rows_admitted_and_cancelled_mid_batch_get_the_eager_tokens(eager, compiled, mode):
    assert run_with_admission_and_cancel(compiled, mode) == run_with_admission_and_cancel(eager, mode)


@pytest.mark.parametrize("check_every", [1, 3, 12])
def test_inside_a_canvas_only_the_stop_flags_are_read(eager, check_every):
    """A canvas's steps read the device only where StopFlags reads it, every `check_every` steps
    (what `tandem bench engines --compile-compare` reports as syncs per canvas)."""
    from tandem.bench.compile_compare import counted

    eager.stop_check_every = check_every
    try:
        req = chat(PROMPTS[0], mode="block", seed=0, canvas=16, max_new_tokens=16, max_denoising_steps=12,
                   confidence_threshold=1e-9, stop_token_ids=[])  # never confident: every canvas runs its 12 steps
        reads = counted(eager, "block", [req, replace(req, seed=1)])
    finally:
        eager.stop_check_every = 1
    assert reads["syncs_per_canvas"] == len([s for s in range(11) if (s + 1) % check_every == 0])


def test_compiled_and_eager_decide_alike_on_flag_reads_every_few_steps(eager, compiled):
    """Reading the stop flags every 4 steps changes when a canvas may stop, not which tokens it
    writes once it has stopped: the same tokens compiled and eager, alone and batched."""
    for engine in (eager, compiled):
        engine.stop_check_every = 4
    try:
        reqs = requests("block")
        alone = [eager.generate(r).token_ids for r in reqs]
        assert [r.token_ids for r in eager.generate_batch(reqs)] == alone
        assert [r.token_ids for r in compiled.generate_batch(reqs)] == alone
    finally:
        for engine in (eager, compiled):
            engine.stop_check_every = 1


def test_auto_compiles_on_gpus_only_and_off_never_compiles(tiny_checkpoint):
    assert should_compile("auto", "cuda") and not should_compile("auto", "cpu")
    assert should_compile("on", "cpu") and not should_compile("off", "cuda")
    with pytest.raises(AssertionError, match="compile must be one of"):
        should_compile("fast", "cpu")
    engine = DiffusionEngine.from_checkpoint(tiny_checkpoint, compile="auto")
    assert not engine.compiled and not is_compiled(engine.model)
    assert not compile_model(engine.model, "off")


@pytest.mark.slow
def test_a_warm_engine_compiles_nothing_more_for_its_first_requests(compiled):
    """What a replica does before it reports ready (engines/replica/deployment.py): after `warm_up`, requests
    in every mode, alone and batched, find their compiled variants already there."""
    import torch._dynamo.utils

    from engines.replica.warm_up import warm_up

    warm_up(compiled)
    before = dict(torch._dynamo.utils.counters["stats"])
    for mode in ("block", "ar", "verified"):
        compiled.generate_batch(requests(mode, n=1))
        compiled.generate_batch(requests(mode, n=3))
    assert dict(torch._dynamo.utils.counters["stats"]).get("unique_graphs", 0) == before.get("unique_graphs", 0)
