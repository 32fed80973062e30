"""Acceptance reference: one-position coupling identities, residual numerics, greedy rule, draft rows."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from pyodide_app.acceptance import (
    FullRow,
    PointMass,
    ReducedRow,
    accept_probability,
    greedy_decision,
    positive_residual,
    stochastic_decision,
)
from pyodide_app.errors import DraftNumericError, ResidualMassError
from pyodide_app.sampling import SeededDraws, categorical_from_uniform

from .enumeration import enumerate_branches


def one_position_law(p, q_row):
    """P(emitted token) for one proposed position (k = 1), enumerated exactly."""
    vocab = len(p)

    def run(draws):
        drafted = draws.categorical(None, 0, 0, q_row.dense(vocab))
        decision = stochastic_decision([p, [F(1)] + [F(0)] * (vocab - 1)], [drafted], [q_row], draws, 0, 3)
        return drafted if decision.accepted == 1 else decision.terminal

    return enumerate_branches(run)


@pytest.mark.parametrize(
    "p, q",
    [
        ([F(1, 2), F(1, 3), F(1, 6)], [F(1, 6), F(1, 3), F(1, 2)]),
        ([F(1), F(0), F(0)], [F(0), F(1, 2), F(1, 2)]),  # disjoint
        ([F(1, 4), F(3, 4), F(0)], [F(1, 4), F(3, 4), F(0)]),  # equal
    ],
)
def test_one_position_output_law_is_the_target(p, q):
    law = one_position_law(p, FullRow(q))
    assert {t: law.get(t, 0) for t in range(3)} == {t: p[t] for t in range(3)}


def test_acceptance_rate_is_one_minus_total_variation():
    p, q = [F(1, 2), F(1, 3), F(1, 6)], [F(1, 6), F(1, 3), F(1, 2)]

    def accepted(draws):
        drafted = draws.categorical(None, 0, 0, q)
        return stochastic_decision([p, p], [drafted], [FullRow(q)], draws, 0, 3).accepted

    tv = sum(abs(a - b) for a, b in zip(p, q)) / 2
    assert enumerate_branches(accepted)[1] == 1 - tv


def test_point_mass_draft_accepts_with_target_probability_and_residual_removes_it():
    p = [F(1, 2), F(1, 4), F(1, 4)]
    assert accept_probability(p[1], PointMass(1).prob(1)) == F(1, 4)
    assert positive_residual(p, PointMass(1)) == [F(2, 3), F(0), F(1, 3)]


def test_reduced_vocabulary_row_is_zero_outside_its_ids():
    row = ReducedRow([2, 0], [F(3, 4), F(1, 4)])
    assert row.dense(4) == [F(1, 4), 0, F(3, 4), 0]
    assert positive_residual([F(1, 4)] * 4, row) == [F(0), F(1, 2), F(0), F(1, 2)]


def test_zero_draft_probability_of_its_own_token_is_a_named_error():
    with pytest.raises(DraftNumericError):
        accept_probability(0.5, 0.0)


def test_residual_without_mass_raises_instead_of_sampling_noise():
    p = [0.2, 0.3, 0.5]
    with pytest.raises(ResidualMassError):
        positive_residual(p, FullRow([0.2, 0.3, 0.5]))
    with pytest.raises(ResidualMassError):  # rounding-level differences only
        positive_residual(p, FullRow([0.2 + 1e-17, 0.3 - 1e-17, 0.5]))
    with pytest.raises(ResidualMassError):
        positive_residual([F(1, 2), F(1, 2)], FullRow([F(1, 2), F(1, 2)]))


def test_residual_clamps_tiny_negatives_and_normalises():
    residual = positive_residual([0.5, 0.5, 0.0], FullRow([0.25, 0.5 + 1e-18, 0.25]))
    assert residual == [1.0, 0.0, 0.0]


def test_greedy_decision_accepts_matching_prefix_then_corrects():
    rows = [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert greedy_decision(rows, [1, 0, 1]).__dict__ == {"accepted": 2, "terminal": 2, "kind": "correction"}
    assert greedy_decision(rows, [1, 0, 2]).__dict__ == {"accepted": 3, "terminal": 1, "kind": "bonus"}
    assert greedy_decision(rows[:1], []).__dict__ == {"accepted": 0, "terminal": 1, "kind": "sample"}


def test_greedy_ties_break_to_the_lowest_index():
    assert greedy_decision([[0.5, 0.5]], []).terminal == 0


def test_inverse_cdf_never_returns_a_zero_probability_token():
    probs = [0.0, 0.25, 0.0, 0.75, 0.0]
    assert categorical_from_uniform(probs, 2.0**-24) == 1
    assert categorical_from_uniform(probs, 0.25) == 1
    assert categorical_from_uniform(probs, 0.25 + 2.0**-24) == 3
    assert categorical_from_uniform(probs, 1.0) == 3
    assert categorical_from_uniform([0.1, 0.1, 0.1], 1.0) == 2  # rounding shortfall -> last positive


def test_seeded_decisions_are_reproducible():
    p, q = [0.5, 0.3, 0.2], FullRow([0.2, 0.3, 0.5])
    first = [stochastic_decision([p, p], [2], [q], SeededDraws(5), r, 3 + r) for r in range(50)]
    again = [stochastic_decision([p, p], [2], [q], SeededDraws(5), r, 3 + r) for r in range(50)]
    assert first == again
    assert {d.accepted for d in first} == {0, 1}
