"""Floors for quality tests, derived from a measurement instead of picked by hand.

A quality test decodes `m` items and counts the right ones. Its floor is the count that a model
as good as the measured one (k right of n, on more items than the test decodes) reaches with
probability 1 - alpha: the alpha-quantile of Binomial(m, p), with p = (k + 1) / (n + 2) (Laplace's
rule of succession, so that a measured 60 of 60 does not demand perfection). A model that lost a
good part of its quality falls under it; one within sampling noise of the measurement does not."""

from __future__ import annotations

import math


def binomial_floor(k: int, n: int, m: int, alpha: float = 0.01) -> int:
    """The smallest count c with P(X < c) <= alpha < P(X <= c) for X ~ Binomial(m, (k+1)/(n+2)):
    a test of `m` items that asserts `right >= c` fails a model at the measured rate with
    probability at most `alpha`."""
    assert 0 <= k <= n and m > 0, (k, n, m)
    p = (k + 1) / (n + 2)
    below = 0.0  # P(X < c)
    for c in range(m + 1):
        below_next = below + math.comb(m, c) * p**c * (1 - p) ** (m - c)  # P(X <= c)
        if below_next > alpha:
            return c
        below = below_next
    return m


def mean_floor(mean: float, sd: float, m: int, z: float = 2.326) -> float:
    """The one-sided 99% (z = 2.326) lower bound of the mean of `m` draws from a population
    measured at `mean` and standard deviation `sd`: what a test over `m` items may demand."""
    return mean - z * sd / math.sqrt(m)
