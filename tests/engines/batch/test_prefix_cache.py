"""Prefix reuse (engines/batch/prefix_cache.py): requests that repeat a conversation's head get its KV
from the cache, in every mode, alone and batched, with outputs identical to an engine without
the cache; the cache stays within its token budget."""

from __future__ import annotations

import json

import pytest

from engines import DiffusionEngine
from engines.defaults import SHIPPED_CHECKPOINT
from engines.batch.prefix_cache import PrefixCache
from engines.types import GenerationRequest

SYSTEM = ("You are the extraction step of an agent. Read the user's message and answer with the fields asked for, "
          "nothing else. Keep names as written, dates as YYYY-MM-DD, and amounts as numbers. ") * 3
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order by its id",
                                           "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}]
QUESTIONS = ["Summarize: the meeting moved to Friday because the room was booked.",
             "Classify the review as positive or negative: the battery died in a day.",
             "Extract the name and the city: Alice Smith moved to Paris last spring."]


def turn(question: str, mode: str, history: int = 0, **kw) -> GenerationRequest:
    earlier = [{"role": "user", "content": f"Earlier question {i}."} if i % 2 == 0 else {"role": "assistant", "content": f"Earlier answer {i}."}
               for i in range(history)]
    messages = [{"role": "system", "content": SYSTEM}, *earlier, {"role": "user", "content": question}]
    return GenerationRequest(messages=messages, mode=mode, max_new_tokens=24, seed=3, **kw)


@pytest.fixture(scope="module")
def engines():
    return DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT), DiffusionEngine.from_checkpoint(SHIPPED_CHECKPOINT, prefix_cache_tokens=0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_reused_prefixes_give_the_same_output_alone_and_batched(engines, mode, drafts_anywhere):
    cached, plain = engines
    cached.prefix_cache.clear()
    requests = [turn(q, mode) for q in QUESTIONS] + [turn(QUESTIONS[0], mode, history=3, tools=TOOLS)]
    expected = [plain.generate(r) for r in requests]
    first = cached.generate(requests[0])  # cold: encodes the head alone and stores it
    assert first.stats.prefix_tokens_reused == 0 and cached.prefix_cache.stats()["entries"] == 1
    alone = [cached.generate(r) for r in requests]
    no_head = GenerationRequest(messages=[{"role": "user", "content": QUESTIONS[1]}], mode=mode, max_new_tokens=24, seed=3)
    mixed = cached.generate_batch(requests[::-1] + [no_head])  # rows on a prefix and one without, in another order
    batched = mixed[:-1][::-1]
    assert mixed[-1].token_ids == plain.generate(no_head).token_ids and mixed[-1].stats.prefix_tokens_reused == 0
    assert [r.token_ids for r in alone] == [r.token_ids for r in expected] == [r.token_ids for r in batched]
    assert [r.stats.prefix_tokens_reused > 0 for r in alone] == [True, True, True, False]  # the last has its own head
    assert all(r.stats.prefix_tokens_reused > 0 for r in batched)
    assert alone[0].stats.prefix_tokens_reused == cached.prefix_length(requests[0], cached.prompt_ids(requests[0]))
    assert [r.stats.forwards for r in alone] == [r.stats.forwards for r in expected]  # the prefill is still one call


@pytest.mark.parametrize("mode", ["ar", "block", "verified"])
def test_a_reused_head_is_not_encoded_again(engines, mode, monkeypatch):
    """The cache's saving, counted where it is made instead of timed (a timing is the benchmark's,
    `tandem bench prefix`): a request on a stored head encodes exactly that many positions fewer
    than the same request without the cache; cold, it encodes every one, as without it."""
    from engines.batch.sequence_batch import SequenceBatch

    cached, plain = engines
    cached.prefix_cache.clear()
    encoded = [0]
    encode = SequenceBatch.encode

    def counting(self, tokens, valid=None, logits="last"):  # the real encode, its positions counted
        encoded[0] += int(valid.sum()) if valid is not None else tokens.numel()
        return encode(self, tokens, valid, logits)

    monkeypatch.setattr(SequenceBatch, "encode", counting)
    request = turn(QUESTIONS[0], mode)

    def positions(engine):
        encoded[0] = 0
        result = engine.generate(request)
        return encoded[0], result

    (cold, _), (warm, reused), (without, expected) = positions(cached), positions(cached), positions(plain)
    assert reused.token_ids == expected.token_ids and reused.stats.prefix_tokens_reused > 0
    assert cold == without and warm == without - reused.stats.prefix_tokens_reused, (cold, warm, without)


def test_a_head_the_template_does_not_repeat_or_a_short_one_is_not_cached(engines):
    cached, _ = engines
    one_message = GenerationRequest(messages=[{"role": "user", "content": SYSTEM + QUESTIONS[0]}], mode="ar", max_new_tokens=4)
    short = GenerationRequest(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTIONS[1]}],
                              mode="ar", max_new_tokens=4)
    completion = GenerationRequest(prompt=SYSTEM + QUESTIONS[2], mode="ar", max_new_tokens=4)
    for request in (one_message, short, completion):
        assert cached.prefix_length(request, cached.prompt_ids(request)) == 0
        assert cached.generate(request).stats.prefix_tokens_reused == 0


@pytest.mark.parametrize("mode", ["ar", "verified", "block"])
def test_a_growing_conversation_reuses_its_previous_turns_and_answers_as_without_the_cache(engines, mode, drafts_anywhere):
    """Each turn sends the whole conversation again plus the last answer and a new question: the
    cache finds the previous turn's head inside it, and every turn's answer is what an engine
    without the cache gives, bit for bit."""
    cached, plain = engines
    cached.prefix_cache.clear()
    messages = [{"role": "system", "content": SYSTEM}]
    reused, heads = [], []
    for t, question in enumerate(QUESTIONS * 2):
        messages.append({"role": "user", "content": f"Turn {t}. {question} Answer in a few words, and keep the names as written."})
        request = GenerationRequest(messages=list(messages), mode=mode, max_new_tokens=24, seed=3)
        got, want = cached.generate(request), plain.generate(request)
        assert got.token_ids == want.token_ids, f"turn {t}: the cache changed the answer"
        reused.append(got.stats.prefix_tokens_reused)
        heads.append(cached.prefix_length(request, cached.prompt_ids(request)))
        messages.append({"role": "assistant", "content": got.text})
    system = cached.prefix_bounds(request, cached.prompt_ids(request))[0]
    assert reused[0] == 0
    assert all(r >= system for r in reused[1:]), reused  # at least the system prompt, from the first turn on
    assert all(r > system for r in reused[3:]), reused  # and from the third turn on, earlier turns too
    assert all(r == h for r, h in zip(reused[1:], heads)), (reused, heads)  # each turn starts where the last one stored


def test_a_prefill_is_cut_at_the_same_message_ends_whatever_follows(engines):
    """The rule that makes cold and warm identical: a later turn cuts the shared head as the
    earlier one did."""
    cached, _ = engines
    short = turn(QUESTIONS[0], "ar", history=4)
    longer = GenerationRequest(messages=short.messages + [{"role": "assistant", "content": "Done. " * 30},
                                                           {"role": "user", "content": QUESTIONS[1]}], mode="ar")
    a, b = cached.prefix_bounds(short, cached.prompt_ids(short)), cached.prefix_bounds(longer, cached.prompt_ids(longer))
    assert a and b[: len(a)] == a and len(b) > len(a)
    assert all(later - earlier >= 64 for earlier, later in zip((0, *b), b))


def test_the_cache_evicts_least_recently_used_prefixes_to_stay_within_its_tokens(engines):
    cached, _ = engines
    engine = DiffusionEngine(_loaded(cached), prefix_cache_tokens=400)
    systems = [f"You are assistant number {i}. " + SYSTEM for i in range(3)]  # three different heads, ~100-150 tokens each
    heads = [GenerationRequest(messages=[{"role": "system", "content": s}, {"role": "user", "content": QUESTIONS[0]}], mode="ar",
                               max_new_tokens=4) for s in systems]
    for request in heads:
        engine.generate(request)
    stats = engine.prefix_cache.stats()
    assert stats["tokens"] <= 400 and stats["entries"] < 3
    assert engine.generate(heads[-1]).stats.prefix_tokens_reused > 0  # the newest is kept
    assert engine.generate(heads[0]).stats.prefix_tokens_reused == 0  # the oldest went


def test_a_stored_prefix_is_copied_out_so_a_row_that_extends_it_leaves_it_unchanged():
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.update(torch.ones(1, 1, 4, 2), torch.ones(1, 1, 4, 2), 0)
    store = PrefixCache(max_tokens=10)
    store.put((1, 2, 3, 4), cache, torch.ones(1, 4, dtype=torch.bool))
    copy = store.get((1, 2, 3, 4))
    copy.cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2), 0)
    assert store.get((1, 2, 3, 4)).cache.layers[0].keys.shape[2] == 4
    assert store.get((9,)) is None and store.stats()["hits"] == 2 and store.stats()["misses"] == 1


def _loaded(engine):
    from engines.model.loading import LoadedModel

    return LoadedModel(model=engine.model, tokenizer=engine.tokenizer, path=engine.path)


def test_bench_prefix_writes_the_records_the_checks_read_and_the_prefill_cost(tmp_path):
    import shutil

    from engines.cost import CostProfile
    from engines.defaults import SHIPPED_CHECKPOINT
    from tandem.main import main as tandem

    checkpoint = shutil.copytree(SHIPPED_CHECKPOINT, tmp_path / "checkpoint")
    out = tmp_path / "prefix.json"
    assert tandem(["bench", "prefix", "--quick", "--modes", "ar", "--turns", "1", "--json", str(out),
                   "--checkpoint", str(checkpoint), "--write-profile"]) == 0
    report = json.loads(out.read_text())
    assert CostProfile.load(checkpoint).prefill_ms_per_token == {"block": report["prefill_ms_per_token"], "ar": report["prefill_ms_per_token"]}
    records = report["records"]
    assert [r["target_prefix_tokens"] for r in records] == [1024, 2048]
    for r in records:
        assert r["prefix_tokens"] >= r["target_prefix_tokens"] and r["identical"] is True
        assert r["ttft_ms_cold"] > 0 and r["ttft_ms_reused"] > 0  # speed is the benchmark's to show, not this test's
    (conversation,) = report["conversations"]
    assert conversation["identical"] is True and conversation["turns"] == 4
    assert conversation["prefix_tokens_reused_last"] > 1024, "the last turn did not find the earlier turns in the cache"
