"""How long a prompt may be, checked where it is cheap: `check_chars`, `PromptEncoder`.

A prompt that cannot fit the context must cost milliseconds and a 400, never a tokenization of
megabytes. Two checks, in order:

1. **A character bound, before any tokenization** (`check_chars`). Every token of a tokenizer
   covers at most `max_chars_per_token` characters of the text it was cut from: a byte-level BPE
   piece is spelled with one alphabet character per byte and a text character is at least one
   byte; a special token covers its own spelling. So a prompt of `c` characters is at least
   `ceil(c / max_chars_per_token)` tokens, and a prompt whose bound alone (plus `max_tokens`) is
   past the context certainly cannot fit: it is refused without rendering or tokenizing it. The
   bound refuses no prompt that fits. It holds only for tokenizers that drop and merge no text
   before cutting it (no normalizer that can shorten it, no pre-tokenizer that removes
   whitespace, no unknown token that swallows a run of characters); for any other tokenizer
   `max_chars_per_token` is None and only check 2 applies. The shipped tokenizer's is 16
   (`<start_of_image>`): a prompt over 65,536 characters never fits its 4,096 tokens.
   The characters counted are the messages' contents as the chat template writes them
   (trimmed); everything else the template adds only adds tokens, so leaving it out keeps the
   bound a lower bound.
2. **A bounded tokenization** (`PromptEncoder.encode`) of what passes: the rendered prompt is cut at its
   special tokens (the turn markers), which the tokenizer never merges across, and encoded a
   window at a time; counting stops as soon as the tokens so far (or the bound of the next
   piece) pass the limit. A prompt just under the character bound costs one window past the
   context, not its whole length. The ids are those `tokenizer.encode` returns for the whole text
   (tests/engines/test_prompt_bounds.py checks it).

Both raise `ContextLengthError` (400, `context_length_exceeded`) naming the limit. The engine
runs them off its event loop (engines.replica.scheduler); the gateway runs check 1 before routing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from engines.errors import ContextLengthError

WINDOW_CHARS = 8192  # characters encoded per call once past the character bound: the most a refused prompt tokenizes beyond its limit

# Pre-tokenizers that keep every character (they only cut or re-spell it) and normalizers that never shorten text.
_KEEPING_PRETOKENIZERS = {"ByteLevel", "Digits", "Metaspace", "Split", "Punctuation", "UnicodeScripts"}


@dataclass(frozen=True)
class PromptLimit:
    """What bounds a prompt: the model's context and the tokenizer's longest token."""

    context_tokens: int  # prompt + answer tokens the model holds
    max_chars_per_token: int | None  # the most characters one token covers; None: no cheap bound for this tokenizer


def max_chars_per_token(tokenizer) -> int | None:
    """The most text characters one token of `tokenizer` (a fast tokenizer) can cover, or None
    when no such bound holds (see the module docstring)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    if spec.get("normalizer") is not None and not _keeps_length(spec["normalizer"]):
        return None
    if not _keeps_chars(spec.get("pre_tokenizer")):
        return None
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or (model.get("unk_token") is not None and model.get("fuse_unk")):
        return None  # WordPiece/Unigram unknowns, or fused BPE unknowns, stand for runs of any length
    pieces = list(tokenizer.get_vocab()) + [t["content"] for t in spec.get("added_tokens", [])]
    prefix = model.get("continuing_subword_prefix") or ""
    return max(max(len(p) - (len(prefix) if prefix and p.startswith(prefix) else 0), 1) for p in pieces)


def _keeps_length(normalizer: dict) -> bool:
    if normalizer["type"] == "Sequence":
        return all(_keeps_length(n) for n in normalizer["normalizers"])
    if normalizer["type"] == "Replace":
        pattern = normalizer["pattern"]
        return "String" in pattern and len(normalizer["content"]) >= len(pattern["String"])
    return normalizer["type"] in ("Prepend", "Lowercase")


def _keeps_chars(pre: dict | None) -> bool:
    if pre is None:
        return True
    if pre["type"] == "Sequence":
        return all(_keeps_chars(p) for p in pre["pretokenizers"])
    return pre["type"] in _KEEPING_PRETOKENIZERS and str(pre.get("behavior", "")).lower() != "removed"


def prompt_chars(messages: list[dict] | None, prompt) -> int:
    """Characters of a request's text that reach the tokenizer verbatim: each message's content as
    the chat template writes it (trimmed), or the completion prompt; for a prompt of token ids,
    their number (each is one token)."""
    if messages is not None:
        return sum(len(c.strip()) for m in messages if isinstance(c := m.get("content"), str))
    return len(prompt) if prompt is not None else 0


def check_chars(messages: list[dict] | None, prompt, max_new_tokens: int, limit: PromptLimit) -> None:
    """Refuse a prompt that certainly cannot fit `limit` with `max_new_tokens` left for the answer,
    from its length alone (O(messages)); a prompt that may fit passes."""
    chars = prompt_chars(messages, prompt)
    per_token = 1 if prompt is not None and not isinstance(prompt, str) else limit.max_chars_per_token
    if per_token is None:
        return
    at_least = -(-chars // per_token)
    if at_least + max_new_tokens > limit.context_tokens:
        what = f"{chars} token ids" if per_token == 1 and not isinstance(prompt, str) else \
            f"{chars} characters (at least {at_least} tokens: one token covers at most {per_token} characters)"
        raise ContextLengthError(f"prompt of {what} plus max_tokens {max_new_tokens} exceeds the context of "
                                 f"{limit.context_tokens} tokens; shorten the prompt or lower max_tokens",
                                 param="messages" if messages is not None else "prompt")


class PromptEncoder:
    """A tokenizer's bounded prompt encoding, for a model of `context_tokens` (one per engine)."""

    def __init__(self, tokenizer, context_tokens: int):
        spec = json.loads(tokenizer.backend_tokenizer.to_str())
        self.backend = tokenizer.backend_tokenizer
        self.limit = PromptLimit(context_tokens, max_chars_per_token(tokenizer))
        added = spec.get("added_tokens", [])
        # cuts are safe only where no added token takes the spaces around it
        safe = added and all(not (t["lstrip"] or t["rstrip"] or t["single_word"] or t["normalized"]) for t in added)
        contents = sorted((t["content"] for t in added), key=len, reverse=True)  # leftmost-longest, as the tokenizer matches
        self._splitter = re.compile("|".join(map(re.escape, contents))) if safe else None

    def check_chars(self, messages: list[dict] | None, prompt, max_new_tokens: int) -> None:
        check_chars(messages, prompt, max_new_tokens, self.limit)

    def encode(self, text: str, room: int, max_new_tokens: int, param: str = "messages") -> list[int]:
        """`tokenizer.encode(text, add_special_tokens=False)`, or a ContextLengthError as soon as
        more than `room` tokens are counted, or the character bound of the next window alone would
        pass it. `max_new_tokens` is only named in the error."""
        per_token = self.limit.max_chars_per_token
        ids: list[int] = []
        for window in self._windows(text):
            if per_token is not None and len(ids) + -(-len(window) // per_token) > room:
                self._refuse(len(ids) + -(-len(window) // per_token), max_new_tokens, param)
            ids += self.backend.encode(window, add_special_tokens=False).ids
            if len(ids) > room:
                self._refuse(len(ids), max_new_tokens, param)
        return ids

    def _refuse(self, at_least: int, max_new_tokens: int, param: str):
        raise ContextLengthError(f"prompt of at least {at_least} tokens plus max_tokens {max_new_tokens} exceeds the context of "
                                 f"{self.limit.context_tokens} tokens; shorten the prompt or lower max_tokens", param=param)

    def _windows(self, text: str):
        """`text` in consecutive windows of about WINDOW_CHARS or more, cut only at the edges of
        added tokens (which the tokenizer splits off before anything else, so the windows encode
        as the whole text does); one window when no cut is safe."""
        if self._splitter is None or len(text) <= WINDOW_CHARS:
            yield text
            return
        start = cut = 0
        for match in self._splitter.finditer(text):
            for edge in (match.start(), match.end()):
                if edge - start > WINDOW_CHARS and cut > start:
                    yield text[start:cut]
                    start = cut
                cut = edge
        if len(text) - start > WINDOW_CHARS and start < cut < len(text):
            yield text[start:cut]
            start = cut
        yield text[start:]
