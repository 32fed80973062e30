"""A draft proposer over any logits model (table model in tests, numpy reference natively).

Drafts autoregressively: row i is processed with the draft's own settings at
history context + d_1..d_{i-1}; the token is the argmax when the draft is
greedy, else a sample with Domain.DRAFT_SAMPLE at (round, i). The q row
returned is exactly the distribution that produced the token (a point mass
for a greedy draft). The ONNX neural draft implements the same contract,
including its stop: with max_entropy_bits, the proposal ends before a row
whose entropy exceeds it (neural.py; a function of the prefix only), and a
caller's `keep` rule on the rows' entropies.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..acceptance import FullRow, PointMass
from ..champion import LogitsModel
from ..errors import DraftNumericError, TargetNumericError
from ..processors import FLOAT, SamplingSettings, argmax, process_row
from ..rng import Domain
from ..sampling import Draws
from .base import EMPTY_PROPOSAL, KeepRule, Proposal


def entropy_bits(q: Sequence[float]) -> float:
    """-sum q log2 q of a processed row (the ONNX draft graph reports the same as its entropy_bits)."""
    return -math.fsum(p * math.log2(p) for p in q if p > 0)


class ModelDraft:
    name = "model_draft"

    def __init__(
        self, model: LogitsModel, settings: SamplingSettings, ops=FLOAT, max_entropy_bits: float | None = None
    ):
        self.model = model
        self.settings = settings.validate()
        self.ops = ops
        self.max_entropy_bits = max_entropy_bits

    def propose(
        self, context: Sequence[int], k: int, round_index: int, draws: Draws | None, keep: KeepRule | None = None
    ) -> Proposal:
        if k <= 0:
            return EMPTY_PROPOSAL
        sequence = list(context)
        tokens, rows, entropies = [], [], []
        for i in range(k):
            try:
                q = process_row(self.model.logits(sequence), self.settings, sequence, self.ops)
            except TargetNumericError as error:
                raise DraftNumericError(f"draft row {i}: {error}") from error
            bits = entropy_bits(q) if self.max_entropy_bits is not None or keep is not None else 0.0
            if self.max_entropy_bits is not None and bits > self.max_entropy_bits:
                break
            entropies.append(bits)
            if keep is not None and not keep(entropies):
                break
            if self.settings.greedy:
                token = argmax(q)
                row = PointMass(token)
            else:
                token = draws.categorical(Domain.DRAFT_SAMPLE, round_index, i, q)
                row = FullRow(q)
            tokens.append(token)
            rows.append(row)
            sequence.append(token)
        return Proposal(tuple(tokens), tuple(rows))

    def pending(self, context: Sequence[int]) -> int:
        """Tokens a proposal feeds before its first draft: it keeps no cache, and its cost is no one's concern."""
        return 1

    def reset(self) -> None:
        pass
