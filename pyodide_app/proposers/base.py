"""The proposer interface: what every draft source (prompt lookup, neural) implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from ..sampling import Draws
from ..waits import Steps


@dataclass(frozen=True)
class Proposal:
    tokens: tuple[int, ...]  # d_1..d_k' (k' <= k; empty means "plain champion step")
    rows: tuple  # q_1..q_k': the distribution that produced each token

    def __post_init__(self):
        if len(self.tokens) != len(self.rows):
            raise ValueError("a proposal needs one q row per token")

    def truncated(self, length: int) -> "Proposal":
        return Proposal(self.tokens[:length], self.rows[:length])


EMPTY_PROPOSAL = Proposal((), ())

# Whether a draft proposer keeps the draft it just made: called with the entropies (bits) of the rows drafted so far
# in this proposal, the last one that draft's row. A function of the draft's rows, so of the context and the drafts
# before it, never of the token drawn from the row: the proposal's length is a stopping time of the draft prefix,
# as with the entropy stop (neural.py), and the verifier's rule stays exact.
KeepRule = Callable[[Sequence[float]], bool]


class Proposer(Protocol):
    name: str

    def propose(self, context: Sequence[int], k: int, round_index: int, draws: Draws | None) -> Steps[Proposal]:
        """Up to k tokens continuing `context` (prompt + published output); Steps (waits.py) when it
        waits on an asynchronous runtime.

        Must depend only on the published context and its own draws
        (Domain.DRAFT_SAMPLE at (round_index, i)); any internal cache is
        rolled back to `context` first, so a discarded round leaves no trace.
        """

    def reset(self) -> None:
        """A new request: forget what its answer must not depend on (counts, and what a seeded answer's draws
        would see; a greedy neural draft keeps its cache, see NeuralProposer.reset)."""


class NoProposer:
    """Champion alone: every round is a plain champion step (k = 0)."""

    name = "none"

    def propose(self, context: Sequence[int], k: int, round_index: int, draws: Draws | None) -> Proposal:
        return EMPTY_PROPOSAL

    def reset(self) -> None:
        pass
