"""Pearson chi-square goodness of fit with a threshold fixed before sampling."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Mapping

from scipy.stats import chi2

MIN_EXPECTED = 5.0  # cells expected below this are pooled into one "rest" cell


@dataclass(frozen=True)
class ChiSquarePlan:
    cells: tuple[Hashable, ...]  # cells tested on their own; everything else is pooled
    probabilities: tuple[float, ...]  # per cell, then the pooled rest last
    samples: int
    alpha: float
    threshold: float  # reject equality when the statistic exceeds this
    support: frozenset  # every outcome with positive expected probability

    @property
    def degrees_of_freedom(self) -> int:
        return len(self.probabilities) - 1


def plan_chi_square(expected: Mapping[Hashable, float], samples: int, alpha: float) -> ChiSquarePlan:
    """Decide cells, degrees of freedom and threshold from the expected law alone.

    Cells expected below MIN_EXPECTED counts are pooled into a "rest" cell;
    if the rest is still too small, the smallest tested cells join it.
    """
    kept = sorted(expected, key=lambda c: (expected[c], repr(c)))
    rest = 0.0
    while kept and (expected[kept[0]] * samples < MIN_EXPECTED or 0 < rest * samples < MIN_EXPECTED):
        rest += expected[kept.pop(0)]
    cells = tuple(sorted(kept, key=repr))
    probabilities = [expected[c] for c in cells] + ([rest] if rest > 0 else [])
    df = len(probabilities) - 1
    threshold = float(chi2.ppf(1.0 - alpha, df))
    support = frozenset(c for c, p in expected.items() if p > 0)
    return ChiSquarePlan(cells, tuple(probabilities), samples, alpha, threshold, support)


def chi_square_statistic(plan: ChiSquarePlan, observed: Counter) -> float:
    if sum(observed.values()) != plan.samples:
        raise ValueError("observed counts do not add up to the planned sample size")
    impossible = set(observed) - plan.support
    if impossible:
        return float("inf")  # an outcome the champion can never produce
    counts = [observed.get(c, 0) for c in plan.cells]
    if len(plan.probabilities) > len(plan.cells):
        counts.append(plan.samples - sum(counts))
    return sum((n - plan.samples * p) ** 2 / (plan.samples * p) for n, p in zip(counts, plan.probabilities))
