"""A small BPE tokenizer for the embedded model, built with the `tokenizers` library.

Digits are split one by one (so numbers copy and add digit-wise); words keep their leading
space, so names and common words become one or two pieces. The special tokens and the chat
template follow Gemma's turn format. The result is a `PreTrainedTokenizerFast` that saves
beside the weights and loads offline with `AutoTokenizer.from_pretrained(dir)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
START_OF_TURN, END_OF_TURN = "<start_of_turn>", "<end_of_turn>"
# DiffusionGemma's config names image tokens; a text-only model still needs valid ids for them.
IMAGE, START_OF_IMAGE, END_OF_IMAGE = "<image>", "<start_of_image>", "<end_of_image>"
SPECIAL_TOKENS = [PAD, EOS, BOS, START_OF_TURN, END_OF_TURN, IMAGE, START_OF_IMAGE, END_OF_IMAGE]

# The chat template of every checkpoint this project trains: system, user, model and tool turns;
# tool declarations, the model's tool calls and tool results (the format router.gateway.structured writes).
CHAT_TEMPLATE = (Path(__file__).parent / "chat_template.jinja").read_text()


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts`; special tokens take the first ids (pad=0, eos=1, bos=2)."""
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=BOS,
        additional_special_tokens=[START_OF_TURN, END_OF_TURN, IMAGE, START_OF_IMAGE, END_OF_IMAGE],
        padding_side="left",
    )
    fast.chat_template = CHAT_TEMPLATE
    for i, name in enumerate(SPECIAL_TOKENS[:3]):
        assert fast.convert_tokens_to_ids(name) == i, f"{name} must have id {i}"
    return fast
