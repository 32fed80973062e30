"""Prompt lookup: copy what followed the most recent earlier occurrence of the last n tokens.

For n from n_max down to n_min, find the largest start j < len(context) - n
with context[j:j+n] == context[-n:], and propose context[j+n : j+n+k]. The
first n that matches wins (`match` finds it in one backward pass); no match
means no proposal (a plain champion step). Each proposed token is a point
mass q = delta(token), so its acceptance probability is p(token) and the
residual is p without it.
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
        """(n, up to k continuation tokens) of the longest matching n-gram (n <= n_max; the latest of those),
        or None. One backward pass over the context: each earlier occurrence of the last token is extended
        backwards while it keeps matching the context's tail."""
        context = list(context)
        last = len(context) - 1
        cap = min(self.n_max, last)
        best_n, best_end = 0, -1
        for end in range(last - 1, -1, -1):  # end: the last token of an earlier occurrence (a continuation exists)
            if context[end] != context[last]:
                continue
            n = 1
            while n < cap and end >= n and context[end - n] == context[last - n]:
                n += 1
            if n > best_n:
                best_n, best_end = n, end
                if n == cap:
                    break
        if best_n < self.n_min:
            return None
        return best_n, tuple(context[best_end + 1 : best_end + 1 + k])

    def reset(self) -> None:
        pass


def point_masses(tokens: Sequence[int]) -> Proposal:
    """Copied tokens as a proposal: each a point mass q = delta(token)."""
    return Proposal(tuple(tokens), tuple(PointMass(t) for t in tokens))
