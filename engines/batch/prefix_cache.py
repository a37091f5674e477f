"""Prefix reuse: the encoder KV of a prompt's shared head, kept per engine and reused by every mode.

Agent frameworks send the same system prompt, tool declarations and earlier turns on every call;
each turn adds the last answer and a new message. A conversation's prefill is cut at message
ends (`message_bounds`: the chat template's rendering of the messages before a
cut must be exactly the head of the prompt's tokens; cuts at least MIN_PREFIX_TOKENS apart, by a
rule that only looks back) and encoded chunk by chunk, each on top of the last. The cache holds
the KV at two cuts per request, the first (a system prompt other conversations share) and the
last (where this conversation's next turn finds it: its head is this turn's prompt plus the
answer), and a request starts from the longest cut it holds. Because every request that shares
a head cuts it the same way, cold and warm compute the same chunks, and reusing a prefix never
changes a row's numbers (bit for bit; tested).

The cache is an LRU bounded by tokens, keyed by the prefix's token ids, and lives in one engine,
so it never outlives the weights that computed it (a checkpoint change is a new engine). A policy
change cannot invalidate it: KV is a function of weights and token ids alone.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

from engines.defaults import MIN_PREFIX_TOKENS, PREFIX_CACHE_TOKENS

__all__ = ["DEFAULT_CACHE_TOKENS", "MIN_PREFIX_TOKENS", "Prefix", "PrefixCache", "message_bounds"]
DEFAULT_CACHE_TOKENS = PREFIX_CACHE_TOKENS  # prefix tokens kept per engine


@dataclass
class Prefix:
    """One stored prefix: a one-row cache and its slot mask, as `SequenceBatch` holds them."""

    cache: object  # transformers DynamicCache, one row
    mask: torch.Tensor  # (1, P) bool
    tokens: int


class PrefixCache:
    def __init__(self, max_tokens: int = DEFAULT_CACHE_TOKENS):
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self._lock = threading.Lock()  # the engine decodes under its own lock; stats are read from other threads
        self.tokens = 0
        self.hits = 0
        self.misses = 0
        self.reused_tokens = 0
        self.looked_up_tokens = 0  # prefix tokens of every lookup, hit or miss: reused / looked up = what the cache saves

    def get(self, key: tuple[int, ...]) -> Prefix | None:
        """A private copy of the stored prefix (the caller extends it), or None."""
        with self._lock:
            self.looked_up_tokens += len(key)
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            self.reused_tokens += entry.tokens
        return Prefix(copy.deepcopy(entry.cache), entry.mask.clone(), entry.tokens)

    def longest(self, keys: list[tuple[int, ...]]) -> tuple[int, Prefix] | None:
        """The longest of `keys` (heads of one prompt, shortest first) the cache holds, as (its
        index, a private copy); counted as one lookup of the longest key."""
        with self._lock:
            self.looked_up_tokens += len(keys[-1]) if keys else 0
            for i in range(len(keys) - 1, -1, -1):
                entry = self._entries.get(keys[i])
                if entry is not None:
                    self._entries.move_to_end(keys[i])
                    self.hits += 1
                    self.reused_tokens += entry.tokens
                    break
            else:
                self.misses += 1
                return None
        return i, Prefix(copy.deepcopy(entry.cache), entry.mask.clone(), entry.tokens)

    def put(self, key: tuple[int, ...], cache, mask: torch.Tensor) -> None:
        """Store a copy of a one-row cache holding exactly `key`; evict least recently used to fit."""
        if len(key) > self.max_tokens:
            return
        entry = Prefix(copy.deepcopy(cache), mask.clone(), len(key))
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = entry
            self.tokens += entry.tokens
            while self.tokens > self.max_tokens:
                _, old = self._entries.popitem(last=False)
                self.tokens -= old.tokens

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.tokens = 0

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._entries), "tokens": self.tokens, "max_tokens": self.max_tokens,
                    "hits": self.hits, "misses": self.misses, "reused_tokens": self.reused_tokens,
                    "looked_up_tokens": self.looked_up_tokens}


def message_bounds(tokenizer, messages: list[dict], tools: list | None, ids: list[int]) -> tuple[int, ...]:
    """Where a conversation's prompt `ids` (`messages` rendered by the chat template) is cut for its
    prefill: token offsets at message ends, the first one at least MIN_PREFIX_TOKENS in and each
    further one at least MIN_PREFIX_TOKENS after the last kept (a rule that only looks back, so every
    request that shares a head cuts it the same way), the last one before the final message; ()
    when there is no such head. A cut is kept only where the template renders the messages before
    it as exactly the head of the prompt and a special token follows (no merge across it)."""
    if len(messages) < 2 or len(ids) <= MIN_PREFIX_TOKENS:
        return ()
    try:
        full = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True, tokenize=False)
        encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    except Exception:
        return ()
    if encoded["input_ids"] != ids:
        return ()
    token_at_char = {end: i + 1 for i, (_, end) in enumerate(encoded["offset_mapping"])}  # char offset -> tokens up to it
    special = set(tokenizer.all_special_ids)
    bounds: list[int] = []
    for count in range(1, len(messages)):
        try:  # a template may refuse a conversation cut before its last message
            head = tokenizer.apply_chat_template(messages[:count], tools=tools or None, add_generation_prompt=False, tokenize=False)
        except Exception:
            continue
        n = token_at_char.get(len(head))
        if n is None or not full.startswith(head) or n >= len(ids) or ids[n] not in special:
            continue
        if n - (bounds[-1] if bounds else 0) >= MIN_PREFIX_TOKENS:
            bounds.append(n)
    return tuple(bounds)
