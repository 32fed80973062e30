"""Drawing from distributions: the one place randomness is consumed.

The round loop never touches random numbers directly. It asks a `Draws` object
for a categorical sample or a Bernoulli decision, naming the RNG domain,
round and position. `SeededDraws` answers with Philox uniforms (production and
Monte Carlo); the test suite supplies an enumerating implementation that
explores every branch with exact probabilities, so both exercise the same loop.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate
from typing import Protocol, Sequence

from .rng import Domain, PhiloxStream


class Draws(Protocol):
    def categorical(self, domain: Domain, round_index: int, position: int, probs: Sequence) -> int:
        """Index sampled from `probs` (non-negative weights; need not sum to 1)."""

    def bernoulli(self, domain: Domain, round_index: int, position: int, prob) -> bool:
        """True with probability `prob` (0 <= prob <= 1)."""

    def uniform(self, domain: Domain, round_index: int, position: int) -> float:
        """The raw uniform in (0, 1], for samplers outside Python (the ONNX draft graph)."""


def total_mass(values: Sequence) -> float:
    """Stable sum: exact for Fractions, correctly rounded (fsum) for floats."""
    if any(issubclass(kind, float) for kind in set(map(type, values))):  # one C-level pass over the values
        return math.fsum(values)
    return sum(values)


class SupportedRow(list):
    """A distribution over the vocabulary (the full list) that also names its support: the ascending indices
    of its positive entries; every other entry is 0. Top-p keeps a few dozen of 49,152 tokens, so sampling
    from such a row, or forming its residual after a rejected point-mass draft, reads those entries only."""

    support: tuple[int, ...]


def supported_row(size: int, zero, entries: dict) -> SupportedRow:
    """A SupportedRow of `size` entries: `zero` everywhere but at entries' indices (index -> value)."""
    row = SupportedRow((zero,))
    row *= size  # one C-level repeat, as [zero] * size
    for index, value in entries.items():
        row[index] = value
    row.support = tuple(sorted(index for index, value in entries.items() if value > 0))
    return row


def categorical_from_uniform(probs: Sequence, u: float) -> int:
    """Inverse CDF in index order: first i with probs[i] > 0 and cumsum[i] >= u * total.

    u is in (0, 1], so a zero-probability index is never returned. Rounding can
    leave the running sum a hair below the target at the end; the last
    positive index is then the answer. A SupportedRow is read at its support only: the same sums and the
    same answer, since adding a zero changes no sum (fsum's nor a running one).
    """
    if isinstance(probs, SupportedRow) and probs.support:
        support = probs.support
        values = [probs[i] for i in support]
        running = list(accumulate(values, initial=0))[1:]
        index = bisect_left(running, u * total_mass(values))
        return support[min(index, len(support) - 1)]
    target = u * total_mass(probs)
    # The running sum over the positive entries, as one C-level accumulate over all of them (adding a zero
    # leaves the sum as it is). Running sums never decrease, so the first index reaching the target is a
    # bisection; from there, the first positive entry is the answer (a zero entry shares its sum with the
    # entries before it).
    running = list(accumulate(probs, initial=0))[1:]  # int start keeps Fractions exact
    index = bisect_left(running, target)
    while index < len(probs) and not probs[index] > 0:
        index += 1
    if index < len(probs):
        return index
    for index in range(len(probs) - 1, -1, -1):
        if probs[index] > 0:
            return index
    raise ValueError("cannot sample from a distribution with no mass")


class SeededDraws:
    """Draws from the request's Philox streams."""

    def __init__(self, seed: int):
        self.stream = PhiloxStream(seed)

    def categorical(self, domain: Domain, round_index: int, position: int, probs: Sequence) -> int:
        return categorical_from_uniform(probs, self.stream.uniform(domain, round_index, position))

    def bernoulli(self, domain: Domain, round_index: int, position: int, prob) -> bool:
        # u in (0, 1]: prob 1 always accepts, prob 0 never does.
        return self.stream.uniform(domain, round_index, position) <= prob

    def uniform(self, domain: Domain, round_index: int, position: int) -> float:
        return self.stream.uniform(domain, round_index, position)
