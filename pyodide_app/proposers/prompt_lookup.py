"""Prompt lookup: copy what followed the most recent earlier occurrence of the last n tokens.

For n from n_max down to n_min, find the largest start j < len(context) - n
with context[j:j+n] == context[-n:], and propose context[j+n : j+n+k]. The
first n that matches wins; no match means no proposal (a plain champion
step). Each proposed token is a point mass q = delta(token), so its
acceptance probability is p(token) and the residual is p without it.
"""

from __future__ import annotations

from typing import Sequence

from ..acceptance import PointMass
from ..sampling import Draws
from .base import EMPTY_PROPOSAL, Proposal


class PromptLookup:
    name = "prompt_lookup"

    def __init__(self, n_max: int = 3, n_min: int = 1):
        if not 1 <= n_min <= n_max:
            raise ValueError(f"need 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
        self.n_max = n_max
        self.n_min = n_min

    def propose(self, context: Sequence[int], k: int, round_index: int, draws: Draws | None) -> Proposal:
        if k <= 0:
            return EMPTY_PROPOSAL
        match = self.match(context, k)
        return EMPTY_PROPOSAL if match is None else point_masses(match[1])

    def match(self, context: Sequence[int], k: int) -> tuple[int, tuple[int, ...]] | None:
        """(n, up to k continuation tokens) of the longest matching n-gram, or None."""
        context = list(context)
        for n in range(min(self.n_max, len(context) - 1), self.n_min - 1, -1):
            start = find_latest_earlier(context, context[-n:])
            if start is not None:
                return n, tuple(context[start + n : start + n + k])
        return None

    def reset(self) -> None:
        pass


def point_masses(tokens: Sequence[int]) -> Proposal:
    """Copied tokens as a proposal: each a point mass q = delta(token)."""
    return Proposal(tuple(tokens), tuple(PointMass(t) for t in tokens))


def find_latest_earlier(context: list[int], pattern: list[int]) -> int | None:
    """Largest j with context[j:j+n] == pattern and j + n < len(context) (a continuation exists)."""
    n = len(pattern)
    first = pattern[0]
    for start in range(len(context) - n - 1, -1, -1):
        if context[start] == first and context[start : start + n] == pattern:
            return start
    return None
