"""The embedded model's BPE tokenizer (lab.model.tokenizer): special tokens first, digits one by one,
the task suite's items round trip, and it saves and loads offline with the chat template."""

from __future__ import annotations

from transformers import AutoTokenizer

from lab.model.tokenizer import END_OF_TURN, SPECIAL_TOKENS, START_OF_TURN, train_tokenizer
from lab.model.tasks import FAMILIES, generate_suite

TEXTS = ["Alice Smith lives in Paris.", "Add step by step: 12 7 4 30 9", "The meeting moved to Tuesday."] * 20


def test_tokenizer_round_trips_suite_items():
    items = generate_suite(40, "train", 0)
    tok = train_tokenizer([t for i in items for t in (i.prompt, i.answer)], vocab_size=1024)
    for item in generate_suite(3, "test", 0):
        ids = tok(item.answer, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == item.answer
        assert tok.pad_token_id not in ids and tok.eos_token_id not in ids
        assert item.count_tokens(tok) == len(ids) == item.output_tokens
    short = [i.count_tokens(tok) for i in items if not FAMILIES[i.family].long]
    assert max(short) <= 128


def test_special_tokens_take_the_first_ids_and_are_never_split():
    tok = train_tokenizer(TEXTS, vocab_size=300)
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    ids = tok(f"{START_OF_TURN}user\nHi{END_OF_TURN}", add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids(START_OF_TURN) and ids[-1] == tok.convert_tokens_to_ids(END_OF_TURN)


def test_digits_are_split_one_by_one():
    tok = train_tokenizer(TEXTS + ["1234 5678 90"] * 50, vocab_size=300)
    pieces = tok.convert_ids_to_tokens(tok("12730", add_special_tokens=False)["input_ids"])
    assert pieces == ["1", "2", "7", "3", "0"]


def test_it_saves_and_loads_with_its_chat_template(tmp_path):
    tok = train_tokenizer(TEXTS, vocab_size=300)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = loaded.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith(f"{START_OF_TURN}model\n") and f"{START_OF_TURN}user\nHi{END_OF_TURN}" in text
    assert loaded("Paris 42")["input_ids"] == tok("Paris 42")["input_ids"]
