"""The slot cache (engines/batch/static_cache.py, engines/batch/static_batch.py) against the library's DynamicCache:
every mode writes the same tokens with either layout, through what changes a batch's shape (rows
admitted and cancelled mid-batch, a prefix restored from the cache, a batch outgrowing its bucket,
a row split off near the end of the context), on eager calls (the compiled ones: test_compiled.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engines import DiffusionEngine, GenerationRequest
from engines.batch.static_cache import MIN_SLOTS, SlotCache, bucket
from engines.batch.static_batch import StaticSequenceBatch, open_batch, use_slot_cache
from tests.engines.factories import PROMPTS, chat
from tests.engines.grammar.helpers import schema_spec
from tests.engines.batch.helpers import SYSTEM, requests, run_with_admission_and_cancel


@pytest.fixture(scope="module")
def dynamic(tiny_checkpoint):
    return DiffusionEngine.from_checkpoint(tiny_checkpoint)


@pytest.fixture(scope="module")
def slots(tiny_checkpoint):
    engine = DiffusionEngine.from_checkpoint(tiny_checkpoint)
    use_slot_cache(engine.model)
    assert isinstance(open_batch(engine.model, 1), StaticSequenceBatch)
    return engine


def test_buckets_are_powers_of_two_from_the_smallest():
    assert [bucket(n) for n in (0, 1, MIN_SLOTS, MIN_SLOTS + 1, 1000, 1024, 1025)] == [
        MIN_SLOTS, MIN_SLOTS, MIN_SLOTS, 2 * MIN_SLOTS, 1024, 1024, 2048]


@pytest.mark.parametrize("mode", ["block", "ar", "verified"])
def test_every_mode_writes_the_dynamic_caches_tokens(dynamic, slots, mode):
    want = [r.token_ids for r in dynamic.generate_batch(requests(mode, n=4))]
    assert [r.token_ids for r in slots.generate_batch(requests(mode, n=4))] == want
    assert all(want)


def test_structured_answers_match(dynamic, slots):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
              "required": ["name", "city"], "additionalProperties": False}
    spec = schema_spec(schema)
    for mode in ("block", "ar", "verified"):  # block: a skeleton-seeded canvas (engines.modes.seeded)
        seeded = {"skeleton": spec.skeleton} if mode == "block" else {}
        reqs = [chat(p, mode=mode, seed=i, max_new_tokens=48, temperature=0.0, grammar=spec.grammar, **seeded)
                for i, p in enumerate(PROMPTS[:2])]
        assert [r.token_ids for r in slots.generate_batch(reqs)] == [r.token_ids for r in dynamic.generate_batch(reqs)]


@pytest.mark.parametrize("mode", ["ar", "verified"])
def test_rows_admitted_and_cancelled_mid_batch_match(dynamic, slots, mode):
    assert run_with_admission_and_cancel(slots, mode) == run_with_admission_and_cancel(dynamic, mode)


def test_a_prefix_stored_by_either_layout_serves_the_other(dynamic, slots):
    """The prefix cache holds what a batch stored; an engine switched between layouts (what the
    compile-compare bench does) restores either kind."""
    def turn(text):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        return slots.generate(GenerationRequest(messages=messages, mode="ar", temperature=0.0, max_new_tokens=16))

    want = []
    for text in PROMPTS[:2]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        dynamic.prefix_cache.clear()
        want.append(dynamic.generate(GenerationRequest(messages=messages, mode="ar", temperature=0.0, max_new_tokens=16)).token_ids)
    for first_layout, second_layout in ((True, False), (False, True)):
        slots.prefix_cache.clear()
        use_slot_cache(slots.model, first_layout)
        first = turn(PROMPTS[0])
        use_slot_cache(slots.model, second_layout)
        second = turn(PROMPTS[1])
        use_slot_cache(slots.model, True)
        assert second.stats.prefix_tokens_reused > 0
        assert [first.token_ids, second.token_ids] == want


def test_a_long_answer_outgrows_its_bucket_and_matches(dynamic, slots):
    req = chat(PROMPTS[5], mode="ar", temperature=0.0, max_new_tokens=MIN_SLOTS + 40, stop_token_ids=[])
    got = slots.generate(req)
    assert len(got.token_ids) == MIN_SLOTS + 40, "the answer ran past the first bucket"
    assert got.token_ids == dynamic.generate(req).token_ids


def test_a_row_near_the_end_of_the_context_splits_off_and_matches(dynamic, slots):
    """Block rows whose next canvas would pass the context go on alone (engines.modes.block.split_near_the_end,
    a copy of the row's KV); the other rows keep their batch."""
    context = dynamic.model.config.text_config.max_position_embeddings
    long_prompt = [5 + (i % 50) for i in range(context - 40)]
    reqs = [GenerationRequest(prompt=long_prompt, mode="block", seed=0, max_new_tokens=30, stop_token_ids=[]),
            replace(requests("block", n=1)[0], max_new_tokens=30)]
    want = [r.token_ids for r in dynamic.generate_batch(reqs)]
    assert [r.token_ids for r in slots.generate_batch(reqs)] == want


def test_the_cache_writes_in_place_and_keeps_its_buffers(slots):
    """An AR step writes one slot of the same buffers (what a compiled step and a captured graph need)."""
    batch = open_batch(slots.model, 2)
    ids = torch.tensor([[3, 4, 5], [6, 7, 8]])
    batch.encode(ids)
    keys = batch.cache.layers[0].keys
    before = keys.data_ptr(), keys.shape
    batch.encode(torch.tensor([[9], [10]]))
    assert (keys.data_ptr(), keys.shape) == before and batch.slots == 4 and int(batch.cache.write) == 4
    assert batch.lengths().tolist() == [4, 4]
    batch.keep_slots(3)
    assert batch.slots == 3 and batch.lengths().tolist() == [3, 3] and isinstance(batch.cache, SlotCache)
