"""The closer: the shortest way an answer under a grammar can still end, from wherever it stands.

A grammar (engines.grammar.constraint) says which tokens may come next, not how far away the end is.
`Closer.path(matcher, string, limit)` walks a copy of the matcher to a state where the answer may
end, and returns the tokens it took:

- forced text, as the grammar library tokenizes it (`compute_ff_tokens`: keys, tool names' heads);
- at a choice, the token that ends the most: the end of the answer, the end of a JSON string,
  closing brackets, a comma, then the shortest values (a digit, an empty string, true/false/null);
- where nothing that ends is allowed yet (a string whose `pattern` is unmet, a number below its
  `minimum`, a tool name not yet complete), a search over single characters for a place where
  something that ends is allowed: a character after which it is, else one that changes what may
  come next in a way not seen yet (the '@' of an email address), else the first allowed. A
  pattern whose progress the next-token mask cannot show (`(.*z){20}`) may not be found: the
  walk gives up at its limit, and the request is refused before decoding.

The path's length is what the answer still needs at most, as this closer writes it. The engine
uses it before decoding (a request whose max_tokens is below the path from the start, or whose
grammar has no answer, is a 400) and while decoding (`TokenConstraint.keep_room`: a token is
taken only if the path after it still fits in the tokens left), so a constrained answer always
ends valid within max_tokens, whatever the model writes.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import llguidance
import numpy as np

VALUE_STREAK = 3  # value tokens (a digit, '"') in a row before the closer searches for an end instead (0.000... under a bound)
SEARCH_DEPTH = 48  # characters one search walks before it hands back what it has (the walk goes on from there)
SEARCH_BEAM = 8  # where no single character is allowed: the shortest tokens tried
SEARCH_MASKS = 4096  # masks one path may compute while searching: bounds the work of a hostile pattern
# Single characters in the order the search tries them: a plain value first, whitespace last.
CHAR_ORDER = string.ascii_lowercase + string.digits + string.ascii_uppercase + "-_.@:/+" + string.punctuation + " "

OVER_LIMIT, GAVE_UP = "over the limit", "gave up"  # why `Closer.path` found no path, besides the library's own errors
String = tuple[bool, bool]  # (inside a JSON string, just after a backslash)
OUTSIDE: String = (False, False)


def after_text(state: String, text: str) -> String:
    """The string state after `text` (quotes and escapes, as JSON reads them)."""
    inside, escaped = state
    for ch in text:
        if escaped:
            escaped = False
        elif inside and ch == "\\":
            escaped = True
        elif ch == '"':
            inside = not inside
    return inside, escaped


@dataclass
class Scores:
    """What each token ends, as the closer prefers it (0: nothing)."""

    inside: np.ndarray  # (V,) inside a string: tokens that start by ending it (then only ] } and spaces)
    outside: np.ndarray  # (V,) outside: ] } and spaces (2+), a comma (1.5), a short value (1)
    ends_inside: np.ndarray  # (V,) bool: what a search inside a string looks for
    ends_outside: np.ndarray  # (V,) bool: what a search outside one looks for (a comma or brackets)


def closing_scores(texts: list[str], vocab_size: int, eos: int) -> Scores:
    inside, outside = np.zeros(vocab_size), np.zeros(vocab_size)
    for t, text in enumerate(texts[:vocab_size]):
        if text.strip() and all(ch in "]} " for ch in text):
            outside[t] = 2 + text.count("]") + text.count("}")
        elif text.strip() == ",":  # ends a value when the object still needs keys: beats starting another value
            outside[t] = 1.5
        elif text.strip() in ("0", "1", '""', '"', "true", "false", "null"):
            outside[t] = 1
        if text.startswith('"') and all(ch in "]} " for ch in text[1:]):
            inside[t] = 10 + text.count("]") + text.count("}")
    if eos < vocab_size:
        inside[eos] = outside[eos] = 100
    return Scores(inside, outside, inside > 0, outside >= 1.5)


class Closer:
    """The closing path of any state of one engine's grammars (its tokenizer's texts and EOS)."""

    def __init__(self, texts: list[str], vocab_size: int, eos: int, special: set[int]):
        self.texts = texts
        self.vocab_size = vocab_size  # the grammar library's vocabulary (the mask's width)
        self.scores = closing_scores(texts, vocab_size, eos)
        self.eos = eos
        rank = {ch: i for i, ch in enumerate(CHAR_ORDER)}
        singles = [t for t, text in enumerate(texts[:vocab_size])  # a backslash only ever leads into escapes
                   if len(text) == 1 and text >= " " and text not in '\\"\ufffd' and t not in special]
        self.chars = np.array(sorted(singles, key=lambda t: (rank.get(texts[t], len(rank)), t)), dtype=np.int64)  # search order
        self.lengths = np.array([len(t) if t != "\ufffd" else 99 for t in texts[:vocab_size]] + [99] * (vocab_size - len(texts)))
        self.spelled = {}  # text -> a token that writes exactly it: to spell a path in the fewest tokens
        for t, text in enumerate(texts[:vocab_size]):
            if text and "\ufffd" not in text and t not in special:
                self.spelled.setdefault(text, t)
        self.longest = max(map(len, self.spelled), default=1)

    def allowed(self, matcher: llguidance.LLMatcher) -> np.ndarray:
        """(V,) bool: the tokens `matcher` allows next."""
        bits = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[: self.vocab_size].astype(bool)

    def path(self, matcher: llguidance.LLMatcher, state: String, limit: int) -> tuple[list[int] | None, str]:
        """(tokens to a state where the answer may end, "") from `matcher`'s state (left as it is), or
        (None, why): OVER_LIMIT (none within `limit` tokens), GAVE_UP (the search's mask budget ran
        out) or the grammar library's error (a grammar with no answer at all, a resource limit)."""
        m, out, streak, budget = matcher.deep_copy(), [], 0, [SEARCH_MASKS]
        while True:
            if m.is_error():
                return None, m.get_error()
            if m.is_accepting():
                return self.fewest_tokens(matcher, out), ""
            if len(out) > limit:
                return None, OVER_LIMIT
            forced = m.compute_ff_tokens()
            if forced:
                if not m.consume_tokens(forced):
                    return None, m.get_error()
                out += forced
                state = after_text(state, "".join(self.texts[t] for t in forced if t < len(self.texts)))
                continue
            allowed = self.allowed(m)
            if m.is_error() or not allowed.any():
                return None, m.get_error() or "no token is allowed"
            scores = np.where(allowed & (not state[1]), self.scores.inside if state[0] else self.scores.outside, 0.0)
            best = int(scores.argmax())
            if scores[best] > 1 or (scores[best] > 0 and streak < VALUE_STREAK):
                streak = streak + 1 if scores[best] <= 1 else 0
                steps = [best]
            else:
                steps, streak = self.search(m, state, allowed, budget), 0
                if steps is None:
                    return None, GAVE_UP
            if not m.consume_tokens(steps):
                return None, m.get_error()
            out += steps
            state = after_text(state, "".join(self.texts[t] for t in steps))

    def fewest_tokens(self, matcher: llguidance.LLMatcher, path: list[int]) -> list[int]:
        """`path`'s text in the fewest tokens (forced text comes tokenized as the library splits it,
        which can take more), if the grammar takes that spelling to its end; else `path`."""
        text = "".join(self.texts[t] if t < len(self.texts) else "\ufffd" for t in path)
        best: list[tuple[int, int] | None] = [(0, -1)] + [None] * len(text)  # (tokens, last token) to spell text[:i]
        for i in range(len(text)):
            if best[i] is None:
                continue
            for n in range(1, min(self.longest, len(text) - i) + 1):
                t = self.spelled.get(text[i : i + n])
                if t is not None and (best[i + n] is None or best[i][0] + 1 < best[i + n][0]):
                    best[i + n] = (best[i][0] + 1, t)
        if best[-1] is None or best[-1][0] >= len(path):
            return path
        spelled, i = [], len(text)
        while i:
            spelled.append(best[i][1])
            i -= len(self.texts[best[i][1]])
        spelled.reverse()
        return spelled if matcher.validate_tokens([*spelled, self.eos]) == len(spelled) + 1 else path

    def _ends(self, m: llguidance.LLMatcher, state: String, allowed: np.ndarray) -> bool:
        if state[1]:  # after a backslash a quote is text, not the end of the string
            return m.is_accepting()
        return m.is_accepting() or bool((allowed & (self.scores.ends_inside if state[0] else self.scores.ends_outside)).any())

    def _unpack(self, mask: bytes) -> np.ndarray:
        return np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")[: self.vocab_size].astype(bool)

    def search(self, m: llguidance.LLMatcher, state: String, allowed: np.ndarray, budget: list[int]) -> list[int] | None:
        """Characters (with the text each forces) to a place where something that ends is allowed.
        Each step tries the allowed single characters in CHAR_ORDER: one after which something ends
        wins; else the first that changes what may come next in a way not seen yet (the '@' of an
        email address), else the first. After SEARCH_DEPTH steps without an end, the steps so far
        (the caller goes on from there); None when the mask budget runs out."""
        steps, node, seen = [], m.deep_copy(), {m.compute_bitmask()}
        for _ in range(SEARCH_DEPTH):
            candidates = self.chars[allowed[self.chars]]
            if not len(candidates):  # no single character: the shortest tokens allowed
                ids = np.nonzero(allowed)[0]
                candidates = ids[np.argsort(self.lengths[ids], kind="stable")][:SEARCH_BEAM]
            first = novel = None
            for c in candidates.tolist():
                child = node.deep_copy()
                forced = child.compute_ff_tokens() if child.consume_token(c) else None
                if forced is None or (forced and not child.consume_tokens(forced)):
                    continue
                budget[0] -= 1
                mask = child.compute_bitmask()
                if child.is_error():
                    continue
                taken = [c, *forced]
                child_state = after_text(state, "".join(self.texts[t] for t in taken if t < len(self.texts)))
                child_allowed = self._unpack(mask)
                if self._ends(child, child_state, child_allowed):
                    return steps + taken
                step = (taken, child, child_state, child_allowed, mask)
                first = first or step
                if novel is None and mask not in seen:
                    novel = step
                if budget[0] <= 0:
                    return None
            if first is None:
                return None
            taken, node, state, allowed, mask = novel or first
            steps += taken
            seen.add(mask)
        return steps
