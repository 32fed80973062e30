"""Acceptance reference: the decision of one verification round.

Inputs (replay_frontier layout, k drafts):
    target_rows[j], j = 0..k : processed champion distribution scoring the token
                               after input j (input 0 is the frontier);
    drafts[i],      i < k    : proposed tokens d_1..d_k;
    draft_rows[i],  i < k    : q_i, the processed draft distribution that
                               actually sampled drafts[i].
Output: `Decision(accepted A, terminal token, kind)`, with the terminal the
correction at the first rejection, the bonus from row k when all k are
accepted, or a plain champion sample when k = 0.

Greedy: accept while the draft equals argmax(target row) (lowest index wins
ties); the terminal is the argmax of the first disagreeing row (or row k).
Stochastic: accept draft i when u <= min(1, p_i(y)/q_i(y)); at the first
rejection sample from norm([p_i - q_i]+). A point-mass draft (prompt lookup, a
greedy draft) is coupled instead: the champion samples row i's token with the
uniform of its context index (Domain.TOKEN_SAMPLE), the draft passes iff it is
that token, and otherwise that token is the correction (the same law: accepted
with p_i(y), else p_i without y). Plain and bonus samples use the same uniform,
so a sampled answer made of none and point-mass rounds is the same token for
token whatever was proposed, or how many, in each round. The WGSL verify kernel
implements the same rule; this module is its specification.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import repeat
from operator import sub, truediv
from typing import Any, Callable, Sequence

from .errors import DraftNumericError, ResidualMassError
from .processors import argmax
from .rng import Domain
from .sampling import Draws, SupportedRow, supported_row, total_mass

# A float residual at or below this mass is rounding noise, not a distribution: the
# round fails with ResidualMassError instead of sampling garbage. The WGSL verify
# kernel gets the same constant (gpu_champion.constants_header), so both verifiers
# refuse the same rows; f32 rounding of a mass near 1 is ~1e-7, well below it.
FLOAT_RESIDUAL_FLOOR = 1e-6


class DraftRow:
    """A draft's q row as its runtime returned it. `probs` is kept as given (a list, array('f'), a numpy row or,
    in the browser, a JS Float32Array), so large rows reach the GPU without a Python loop. Python reads go
    through `values`: `probs` itself, or where a runtime passes `to_local`, one copy of it made on first use
    (in Pyodide each element read of a JS typed array crosses the FFI: under Node, a sampled decision that
    rejects a 12,288-entry row read through the proxy took 3.9 ms warm and ~40 ms on a first pass; from the
    copy, 0.5 ms)."""

    def __init__(self, probs: Sequence, to_local: Callable[[Any], Sequence] | None = None):
        self.probs = probs
        self._to_local = to_local
        self._values: Sequence | None = None

    @property
    def values(self) -> Sequence:
        if self._values is None:
            self._values = self.probs if self._to_local is None else self._to_local(self.probs)
        return self._values

    def is_finite(self) -> bool:
        """No NaN or infinite entry (one C-level pass: any would make the sum non-finite)."""
        return math.isfinite(sum(self.values))


class FullRow(DraftRow):
    """q over the whole vocabulary."""

    def prob(self, token: int):
        return self.values[token]

    def dense(self, size: int) -> list:
        return list(self.values)


class ReducedRow(DraftRow):
    """q over a reduced draft vocabulary: probs[j] is the mass of token ids[j]; 0 elsewhere."""

    def __init__(
        self,
        ids: Sequence[int],
        probs: Sequence,
        to_local: Callable[[Any], Sequence] | None = None,
        positions: dict[int, int] | None = None,
    ):
        """positions: {ids[j]: j}, which a runtime builds once and shares among its rows (built here if None)."""
        super().__init__(probs, to_local)
        self.ids = ids  # kept as given (tuple or array); shared by the rows of a round
        self._positions = positions

    @property
    def positions(self) -> dict[int, int]:
        if self._positions is None:
            self._positions = id_positions(self.ids)
        return self._positions

    def prob(self, token: int):
        j = self.positions.get(token)
        return 0 if j is None else self.values[j]

    def dense(self, size: int) -> list:
        values, positions = self.values, self.positions
        return [values[positions[token]] if token in positions else 0 for token in range(size)]


def id_positions(ids: Sequence[int]) -> dict[int, int]:
    """{ids[j]: j} for a reduced draft vocabulary (ids distinct)."""
    return {int(token): j for j, token in enumerate(ids)}


class PointMass:
    """q = delta(token): a deterministic proposal (prompt lookup, greedy draft)."""

    def __init__(self, token: int):
        self.token = token

    def prob(self, token: int):
        return 1 if token == self.token else 0

    def dense(self, size: int) -> list:
        return [1 if token == self.token else 0 for token in range(size)]

    def is_finite(self) -> bool:
        return True


@dataclass(frozen=True)
class Decision:
    accepted: int  # A: drafts accepted before the first rejection (0..k)
    terminal: int  # correction, bonus or plain-sample token
    kind: str  # "correction" | "bonus" | "sample"


def accept_probability(p_y, q_y):
    """min(1, p(y)/q(y)); q(y) > 0 because the draft sampled y from q."""
    if not q_y > 0:
        raise DraftNumericError(f"draft probability of its own token is {q_y}")
    return min(1, p_y / q_y)


def positive_residual(target_row: Sequence, draft_row) -> list:
    """norm([p - q]+) over the vocabulary.

    Float rows: differences are clamped at 0 (tiny negatives are rounding), the
    mass is summed with fsum, and a mass <= FLOAT_RESIDUAL_FLOOR or non-finite
    raises ResidualMassError. Exact rows: the mass must be > 0.
    """
    if isinstance(target_row, SupportedRow):
        return supported_residual(target_row, draft_row)
    q = draft_row.dense(len(target_row))
    residual = list(map(max, map(sub, target_row, q), repeat(0)))  # max(p - q_x, 0), in C-level passes
    mass = check_residual_mass(total_mass(residual))
    return list(map(truediv, residual, repeat(mass)))


def supported_residual(target_row: SupportedRow, draft_row) -> SupportedRow:
    """positive_residual read at the target row's support only: off it p is 0, so [p - q]+ = max(-q, 0) = 0
    (q >= 0), and the entries, their fsum and the normalised row are the dense form's. A top-p row keeps a few
    dozen of 49,152 tokens; the dense form took ~30 ms in Pyodide. A non-finite q anywhere still fails the round,
    as it fails the dense form's mass."""
    if not draft_row.is_finite():
        raise ResidualMassError("the draft row holds a NaN or infinite probability")
    residual = {i: max(target_row[i] - draft_row.prob(i), 0) for i in target_row.support}
    mass = check_residual_mass(total_mass(list(residual.values())))
    return supported_row(len(target_row), 0 / mass, {i: r / mass for i, r in residual.items()})


def check_residual_mass(mass):
    """mass, unless it is no distribution's (see positive_residual): then ResidualMassError."""
    exact = isinstance(mass, (int, Fraction))
    floor = 0 if exact else FLOAT_RESIDUAL_FLOOR
    if (not exact and not math.isfinite(mass)) or mass <= floor:
        raise ResidualMassError(f"residual mass {mass} is at or below the floor {floor}")
    return mass


def greedy_decision(target_rows: Sequence[Sequence], drafts: Sequence[int]) -> Decision:
    return greedy_decision_by(lambda i: argmax(target_rows[i]), drafts)


def greedy_decision_by(best: Callable[[int], int], drafts: Sequence[int]) -> Decision:
    """The greedy rule with best(i) the champion's token at row i (read only up to the first rejection)."""
    for i, token in enumerate(drafts):
        top = best(i)
        if token != top:
            return Decision(i, top, "correction")
    return Decision(len(drafts), best(len(drafts)), "bonus" if drafts else "sample")


def stochastic_decision(
    target_rows: Sequence[Sequence],
    drafts: Sequence[int],
    draft_rows: Sequence,
    draws: Draws,
    round_index: int,
    token_index: int,
) -> Decision:
    """token_index: the context index of the token row 0 draws (len(context); row j draws token_index + j)."""
    for i, token in enumerate(drafts):
        p_row = target_rows[i]
        if isinstance(draft_rows[i], PointMass):
            # Coupled: the draft passes iff it is the champion's own sample of this token (P = p(token)); else
            # that sample is the correction, whose law is then p without `token`: norm([p - delta]+).
            drawn = draws.categorical(Domain.TOKEN_SAMPLE, token_index + i, 0, p_row)
            if drawn == token:
                continue
            return Decision(i, drawn, "correction")
        accept = accept_probability(p_row[token], draft_rows[i].prob(token))
        if draws.bernoulli(Domain.ACCEPT_UNIFORM, round_index, i, accept):
            continue
        residual = positive_residual(p_row, draft_rows[i])
        return Decision(i, draws.categorical(Domain.CORRECTION_SAMPLE, round_index, i, residual), "correction")
    k = len(drafts)
    terminal = draws.categorical(Domain.TOKEN_SAMPLE, token_index + k, 0, target_rows[k])
    return Decision(k, terminal, "bonus" if k else "sample")
