"""Every quality floor in the suite, and the one rule that turns a measurement into a floor.

A quality check decodes or scores a sample and counts the right answers. What its floor may be
depends on whether the count is a draw:

- **fixed** (`Fixed`): the same items every run, decoded greedily or with fixed seeds, scored by a
  deterministic model (the shipped checkpoint's first 20 test items per family, a router's
  held-out records). The count is a property of the code and the weights, not a sample: the floor
  is the count measured today less one item (`FLIP`), the one a platform's float order can flip at
  a near-tie. A mean of per-item rates in [0, 1] (verified's acceptance) gets the same one item:
  the mean less 1/m. A loss of two items fails.
- **drawn** (`Drawn`): the items or the decoding change from run to run. Its floor is the count a
  model at the measured rate (k right of n, Laplace's rule of succession: p = (k + 1) / (n + 2))
  reaches with probability 1 - alpha on the test's m items: the alpha-quantile of Binomial(m, p),
  written beside the measurement by `floor()`. (No check in the suite is drawn today; the rule is
  here for the first that is.)

`MEASURED` is the one table: a name per check, the figure measured today and what it was measured
on. A test asserts `at_least(name, right)`; `floor(name)` is the rule. The figures come from
tests/measures.py, the same functions the tests call, and are re-measured by

    .venv/bin/python -m tests.floors        # ~3 minutes on the 2-core VM

which prints every figure beside the table's and the floor (its last output: tests/data/floors.txt).
docs/operations.md section 7 shows the same table.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

FLIP = 1  # items a fixed sample's count may lose to a platform's float order (a near-tie flipped)


@dataclass(frozen=True)
class Fixed:
    """A fixed sample scored deterministically: `measured` right of `of` items (a count), or the mean
    over `of` items of a per-item rate in [0, 1] (a float)."""

    measured: int | float
    of: int


@dataclass(frozen=True)
class Drawn:
    """A random sample: `right` of `n` measured on a larger sample; the test draws `sample` items."""

    right: int
    n: int
    sample: int
    alpha: float = 0.01  # the chance that a model as good as the measured one fails the check


# Measured 2026-12-06 on the 2-core VM (tests/data/floors.txt is the regeneration's output).
MEASURED: dict[str, Fixed | Drawn] = {
    # tests/engines/test_shipped_model.py: the shipped tiny checkpoint on the first 20 test items of
    # each family (lab.model.tasks.generate_suite(20, "test", seed=0)), AR greedy, block at 12 steps
    # with each item's fixed seed
    "shipped classify/ar": Fixed(20, 20),
    "shipped classify/block": Fixed(20, 20),
    "shipped summarize/ar": Fixed(20, 20),
    "shipped summarize/block": Fixed(12, 20),
    "shipped plan/ar": Fixed(20, 20),
    "shipped code/ar": Fixed(20, 20),
    "shipped code/block": Fixed(19, 20),
    "shipped extract/ar": Fixed(20, 20),
    # the structured families as `tandem eval structured` decodes them: items whose every field is right
    "shipped schema/ar": Fixed(20, 20),
    "shipped schema/block+skeleton": Fixed(12, 20),
    "shipped toolcall/ar": Fixed(17, 20),
    "shipped toolcall/block+skeleton": Fixed(13, 20),
    "shipped label/ar": Fixed(20, 20),
    "shipped label/block+skeleton": Fixed(20, 20),
    # verified's mean draft acceptance over the first 20 summarize and 20 code items, each alone
    "shipped verified acceptance": Fixed(0.807, 40),
    # tests/router/test_cli.py: a router trained on the first 500 training records (fixed seed),
    # task accuracy on the first 150 held-out records and mode agreement on the first 40
    "small router task accuracy": Fixed(126, 150),
    "small router mode agreement": Fixed(37, 40),
    # tests/router/test_classifier.py: the shipped router model on the held-out split
    "shipped router task accuracy": Fixed(1115, 1140),
    "shipped router mode agreement": Fixed(1127, 1140),
    # tests/engines/model/test_quantization.py: fp8's next-token choice equals fp32's, teacher-forced
    # over tests.engines.factories.PROMPTS
    "fp8 top-1 agreement": Fixed(93, 96),
}


def floor(name: str) -> int | float:
    """What the check `name` must reach (the module docstring's rule)."""
    m = MEASURED[name]
    if isinstance(m, Drawn):
        return binomial_floor(m.right, m.n, m.sample, m.alpha)
    if isinstance(m.measured, int):
        return max(m.measured - FLIP, 0)
    return m.measured - FLIP / m.of


def at_least(name: str, value: int | float, of: int | None = None) -> None:
    """Assert that the check `name` scored at least its floor (and on the items it was measured on)."""
    m = MEASURED[name]
    want_of = m.sample if isinstance(m, Drawn) else m.of
    assert of is None or of == want_of, f"{name}: scored on {of} items, measured on {want_of}: re-measure (python -m tests.floors)"
    assert value >= floor(name), f"{name}: {value} (of {want_of}), floor {floor(name)} from {m} (tests/floors.py)"


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


def main() -> int:
    """Re-measure every figure (tests/measures.py) and print it beside the table's and the floor;
    exit 1 if a figure is under its floor."""
    from tests.measures import measure_all

    width = max(map(len, MEASURED))
    print(f"{'check':<{width}}  {'table':>7}  {'today':>7}  {'of':>5}  {'floor':>7}")
    below = 0
    for name, value, of in measure_all():
        m = MEASURED[name]
        table = m.measured if isinstance(m, Fixed) else m.right
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        flag = "" if value >= floor(name) else "  UNDER THE FLOOR"
        below += bool(flag)
        if of != (m.of if isinstance(m, Fixed) else m.sample):
            flag += f"  MEASURED ON {m.of if isinstance(m, Fixed) else m.sample} ITEMS IN THE TABLE"
        print(f"{name:<{width}}  {table!s:>7}  {shown:>7}  {of:>5}  {floor(name):>7.6g}{flag}", flush=True)
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
