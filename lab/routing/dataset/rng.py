"""The seeded random source every generator draws from.

`Rng` wraps one `random.Random` and names the few draws the generators make (`choice`, `integer`,
`chance`, ...). All draws go through that one stream, so the data set is a function of the seed and of
the order of the calls: moving a draw earlier or later changes every record after it, and the
`generate()` output with it. Refactor generators by moving whole calls, never by reordering them.
"""

from __future__ import annotations

import random
from collections.abc import MutableSequence, Sequence
from typing import TypeVar

T = TypeVar("T")


class Rng:
    """Named draws over one seeded `random.Random`."""

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`, uniformly."""
        return self._random.choice(options)

    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi], both ends included (`random.randint`)."""
        return self._random.randint(lo, hi)

    def chance(self, probability: float) -> bool:
        """True with the given probability (one `random()` draw, used even when it is 0 or 1)."""
        return self._random.random() < probability

    def sample(self, population: Sequence[T], k: int) -> list[T]:
        """`k` distinct items of `population`, in draw order."""
        return self._random.sample(population, k)

    def shuffle(self, items: MutableSequence) -> None:
        """Shuffle `items` in place."""
        self._random.shuffle(items)

    def uniform(self, lo: float, hi: float) -> float:
        """A float in [lo, hi]."""
        return self._random.uniform(lo, hi)
