"""One row's prompt-lookup state (`Lookup`): where each n-gram of its sequence last occurred, and
the odds that its guesses are right. The guessing and checking passes are in `engines.modes.ar_lookup`;
this state lives apart so that a `Row` (engines/decode/rows.py) can hold it without the two modules
importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

NGRAMS = (3, 2)  # tails of the sequence matched against earlier tokens, longest first
DECAY = 0.9  # the weight each pass leaves on a row's earlier evidence


class Sequence(Protocol):
    """What a guess reads of a row: its prompt and what it has written (engines.decode.rows.Row)."""

    prompt_ids: list[int]
    output: list[int]


@dataclass
class Lookup:
    """One row's guessing: where each n-gram of its sequence last occurred, and how often its
    guesses were right."""

    hits: float = 1.0  # guessed tokens AR agreed with (decayed); with `misses`, a prior of even odds
    misses: float = 1.0  # guesses cut short by a token AR chose otherwise (decayed)
    after: dict[tuple[int, ...], int] = field(default_factory=dict)  # n-gram -> the position after its latest occurrence
    indexed: int = 0  # positions whose n-grams ending there are in `after`

    @property
    def odds(self) -> float:
        """The chance a guessed token is accepted, given the guessed tokens before it were."""
        return self.hits / (self.hits + self.misses)

    def expected(self, n: int) -> float:
        """Tokens a guess of `n` is expected to write past the chosen token: odds + odds^2 + ... + odds^n."""
        a = self.odds
        return n * a if a >= 1.0 else a * (1 - a**n) / (1 - a)

    def guess(self, row: Sequence, most: int) -> list[int]:
        """`most` tokens that followed the latest earlier occurrence of the sequence's tail (its last 3
        tokens, else 2; none: no match). Where they reach the tail, the guess goes on repeating the
        span since that occurrence: a loop is guessed as long as it lasts, not one lap at a time."""
        prompt, output = row.prompt_ids, row.output
        length = len(prompt) + len(output)
        at = lambda i: prompt[i] if i < len(prompt) else output[i - len(prompt)]  # noqa: E731
        for end in range(self.indexed, length - 1):  # n-grams ending before the tail's last token
            for n in NGRAMS:
                if end + 1 >= n:
                    self.after[tuple(at(i) for i in range(end + 1 - n, end + 1))] = end + 1
        self.indexed = max(self.indexed, length - 1)
        if most <= 0:
            return []
        for n in NGRAMS:
            start = self.after.get(tuple(at(i) for i in range(length - n, length))) if length >= n else None
            if start is not None:  # what followed, run on as a loop where it reaches the tail
                return [at(start + i % (length - start)) for i in range(most)]
        return []

    def observe(self, guessed: int, accepted: int) -> None:
        """After a pass that checked `guessed` tokens and kept the first `accepted`."""
        self.hits = DECAY * self.hits + accepted
        self.misses = DECAY * self.misses + (accepted < guessed)
