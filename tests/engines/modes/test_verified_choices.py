"""AR's choice after each draft token (engines.modes.verified_choices), from one commit pass's logits: a free row
chooses at every position at once; a row under a grammar walks the draft with its matcher as far as
the draft agrees, ends with the stop token once the grammar is complete, and leaves its matcher where
it was. The shipped tokenizer and a real llguidance grammar; the logits are written by hand."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoTokenizer

from engines.modes.verified_choices import ar_choices, constrained_choices
from engines.grammar.constraint import GrammarTokenizer
from engines.defaults import SHIPPED_CHECKPOINT
from engines.decode.rows import Row
from engines.types import GenerationRequest
from tests.engines.grammar.helpers import schema_spec

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(SHIPPED_CHECKPOINT)


@pytest.fixture(scope="module")
def vocab() -> int:
    return json.loads((SHIPPED_CHECKPOINT / "config.json").read_text())["text_config"]["vocab_size"]


@pytest.fixture(scope="module")
def grammar_tokenizer(tokenizer, vocab):
    return GrammarTokenizer(tokenizer, vocab)


def row(tokenizer, grammar_tokenizer=None) -> Row:
    constraint = grammar_tokenizer.constraint(schema_spec(SCHEMA).grammar, 64) if grammar_tokenizer else None
    return Row(GenerationRequest(prompt="x", max_new_tokens=64), [1], frozenset({tokenizer.eos_token_id}), None, str, constraint=constraint)


def agreeing_logits(tokens: list[int], vocab: int) -> torch.Tensor:
    """Logits (C, V) whose choice after draft token i is draft token i + 1: AR agrees with the whole draft."""
    logits = torch.zeros(len(tokens), vocab)
    for i, t in enumerate(tokens[1:]):
        logits[i, t] = 10.0
    return logits


def test_a_constrained_row_agreeing_with_a_complete_answer_ends_it_with_the_stop_token(tokenizer, grammar_tokenizer, vocab):
    draft = tokenizer.encode('{"a": 17}', add_special_tokens=False)
    r = row(tokenizer, grammar_tokenizer)
    assert constrained_choices(r, draft, agreeing_logits(draft, vocab), draft[0]) == draft[1:] + [tokenizer.eos_token_id]
    assert r.constraint.consume(draft[0]) and r.output == []  # the matcher was rolled back; nothing committed


def test_a_constrained_row_stops_choosing_where_the_draft_leaves_ar(tokenizer, grammar_tokenizer, vocab):
    draft = tokenizer.encode('{"a": 17}', add_special_tokens=False)
    wrong = draft[:3] + [tokenizer.encode("x", add_special_tokens=False)[0]] + draft[4:]
    choices = constrained_choices(row(tokenizer, grammar_tokenizer), wrong, agreeing_logits(draft, vocab), draft[0])
    assert choices == draft[1:4]  # after d1..d3; d4 is not AR's choice, so nothing after it is


def test_free_rows_choose_everywhere_and_constrained_rows_only_as_far_as_they_agree(tokenizer, grammar_tokenizer, vocab):
    draft = tokenizer.encode('{"a": 17}', add_special_tokens=False)
    logits = torch.stack([torch.randn(len(draft), vocab, generator=torch.Generator().manual_seed(0)), agreeing_logits(draft, vocab)])
    other = [t + 1 for t in draft]
    out = ar_choices([row(tokenizer), row(tokenizer, grammar_tokenizer)], torch.tensor([other, draft]), logits,
                     torch.tensor([0, draft[0]]))
    assert torch.equal(out[0], logits[0].argmax(-1))
    assert out[1].tolist() == draft[1:] + [tokenizer.eos_token_id]
