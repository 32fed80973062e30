"""Hybrid: prompt lookup when the context has an n-gram match (n >= 2), a model draft otherwise.

The choice is made per round, before drafting, from the published context alone; the round's
proposal law is then exactly that of the chosen source (point masses for lookup, the draft's q rows
otherwise), so acceptance stays exact. The draft's KV cache simply catches up (common-prefix
rollback) the next time it is chosen.
"""

from __future__ import annotations

from typing import Generator, Sequence

from ..sampling import Draws
from ..waits import Wait, settle
from .base import EMPTY_PROPOSAL, Proposal, Proposer
from .prompt_lookup import PromptLookup


def hybrid_lookup() -> PromptLookup:
    """Hybrid's matcher: n-gram matches of 2 or 3 tokens (a 1-token match is right too rarely to beat the draft)."""
    return PromptLookup(n_max=3, n_min=2)


class HybridProposer:
    """propose is a generator (Steps, waits.py) because the draft may wait on its runtime."""

    name = "hybrid"

    def __init__(self, draft: Proposer, lookup: PromptLookup | None = None):
        self.lookup = lookup or hybrid_lookup()
        self.draft = draft

    def propose(
        self, context: Sequence[int], k: int, round_index: int, draws: Draws | None
    ) -> Generator[Wait, None, Proposal]:
        if k <= 0:
            return EMPTY_PROPOSAL
        proposal = self.lookup.propose(context, k, round_index, draws)
        if proposal.tokens:
            return proposal
        return (yield from settle(self.draft.propose(context, k, round_index, draws)))

    def reset(self) -> None:
        self.lookup.reset()
        self.draft.reset()
