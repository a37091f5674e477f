"""Prefix reuse: the encoder KV of a prompt's shared head, kept per engine and reused by every mode.

Agent frameworks send the same system prompt, tool declarations and earlier turns on every call;
each turn adds the last answer and a new message. A conversation's prefill is cut at message
ends (`DiffusionEngine.prefix_bounds`: the chat template's rendering of the messages before a
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

__all__ = ["DEFAULT_CACHE_TOKENS", "MIN_PREFIX_TOKENS", "Prefix", "PrefixCache"]
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
