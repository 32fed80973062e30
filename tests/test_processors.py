"""Processors: documented order, tie-breaking, exact and float arithmetic, validation."""

from __future__ import annotations

import math
import random
from array import array
from fractions import Fraction

import pytest

from pyodide_app.acceptance import FullRow, PointMass, ReducedRow, positive_residual
from pyodide_app.errors import InvalidSettings, ResidualMassError, TargetNumericError
from pyodide_app.processors import EXACT, FLOAT, SamplingSettings, apply_top_p, argmax, as_f32, process_row
from pyodide_app.sampling import categorical_from_uniform, total_mass


def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


def test_plain_softmax_at_temperature_one():
    logits = [1.0, 2.0, 0.5, -1.0]
    assert process_row(logits, SamplingSettings()) == pytest.approx(softmax(logits), abs=1e-15)


def test_temperature_zero_is_a_point_mass_on_the_lowest_index_argmax():
    assert process_row([1.0, 3.0, 3.0, 2.0], SamplingSettings(temperature=0)) == [0.0, 1.0, 0.0, 0.0]
    assert argmax([5, 5, 5]) == 0


def test_temperature_divides_logits():
    logits = [1.0, 2.0, 0.0]
    assert process_row(logits, SamplingSettings(temperature=0.5)) == pytest.approx(softmax([2.0, 4.0, 0.0]))


def test_top_k_keeps_k_largest_with_lowest_index_winning_ties():
    probs = process_row([1.0, 2.0, 2.0, 2.0, 0.0], SamplingSettings(top_k=2))
    assert probs[0] == probs[3] == probs[4] == 0.0
    assert probs[1] == probs[2] == pytest.approx(0.5)


def test_top_p_keeps_the_shortest_prefix_reaching_p():
    weights = [Fraction(5), Fraction(3), Fraction(2)]  # probabilities 1/2, 3/10, 1/5
    assert process_row(weights, SamplingSettings(top_p=Fraction(1, 2)), ops=EXACT) == [1, 0, 0]
    assert process_row(weights, SamplingSettings(top_p=Fraction(3, 4)), ops=EXACT) == [
        Fraction(5, 8),
        Fraction(3, 8),
        0,
    ]
    assert process_row(weights, SamplingSettings(top_p=Fraction(4, 5)), ops=EXACT) == [
        Fraction(5, 8),
        Fraction(3, 8),
        0,
    ]
    assert process_row(weights, SamplingSettings(top_p=Fraction(81, 100)), ops=EXACT) == [
        Fraction(1, 2),
        Fraction(3, 10),
        Fraction(1, 5),
    ]


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens():
    logits = [2.0, -1.0, 2.0, -1.0]
    probs = process_row(logits, SamplingSettings(repetition_penalty=2.0), history=[0, 1, 1])
    assert probs == pytest.approx(softmax([1.0, -2.0, 2.0, -1.0]))


def test_order_is_penalty_then_temperature_then_top_k_then_top_p():
    # Penalty first: token 0 (seen, logit 4 -> 2) drops below token 1 (3), so top_k=1 keeps token 1.
    assert process_row([4.0, 3.0, 0.0], SamplingSettings(repetition_penalty=2.0, top_k=1), history=[0]) == [
        0.0,
        1.0,
        0.0,
    ]
    # Greedy after penalty.
    assert process_row([4.0, 3.0, 0.0], SamplingSettings(temperature=0, repetition_penalty=2.0), history=[0]) == [
        0.0,
        1.0,
        0.0,
    ]


def test_exact_arithmetic_matches_float_arithmetic():
    weights = [Fraction(16, 81), Fraction(1), Fraction(16), Fraction(1, 81)]
    settings = SamplingSettings(temperature=2, top_k=3, top_p=Fraction(9, 10), repetition_penalty=2)
    exact = process_row(weights, settings, history=[2, 3], ops=EXACT)
    floats = process_row([math.log(w) for w in weights], SamplingSettings(2.0, 3, 0.9, 2.0), history=[2, 3], ops=FLOAT)
    assert [float(p) for p in exact] == pytest.approx(floats, abs=1e-12)


def test_exact_mode_refuses_irrational_results():
    with pytest.raises(ValueError):
        process_row([Fraction(2), Fraction(1)], SamplingSettings(temperature=2), ops=EXACT)


@pytest.mark.parametrize(
    "settings",
    [
        SamplingSettings(temperature=-0.1),
        SamplingSettings(temperature=float("nan")),
        SamplingSettings(top_p=0),
        SamplingSettings(top_p=1.5),
        SamplingSettings(top_k=-1),
        SamplingSettings(top_k=2.5),
        SamplingSettings(repetition_penalty=0),
        SamplingSettings(repetition_penalty=float("inf")),
    ],
)
def test_invalid_settings_are_refused_with_a_named_field(settings):
    with pytest.raises(InvalidSettings) as error:
        settings.validate()
    assert any(name in str(error.value) for name in ("temperature", "top_p", "top_k", "repetition_penalty"))


@pytest.mark.parametrize("logits", [[float("nan"), 1.0], [float("inf"), 0.0], [-math.inf, -math.inf]])
def test_bad_rows_raise_target_numeric_error(logits):
    with pytest.raises(TargetNumericError):
        process_row(logits, SamplingSettings())


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_a_logit_that_overflows_at_the_temperature_is_an_error_not_a_row(top_p):
    # 1e308 / 0.001 is +inf, so the max-shifted softmax meets inf - inf: NaN, caught only after processing.
    with pytest.raises(TargetNumericError):
        process_row([1e308, 0.0], SamplingSettings(temperature=0.001, top_p=top_p))


# ---- the C-level fast paths equal the plain loops they replace ------------------------------------------


def loop_argmax(values):
    best = 0
    for index in range(1, len(values)):
        if values[index] > values[best]:
            best = index
    return best


def sorted_top_p(probs, top_p):
    """apply_top_p's kept set with the whole vocabulary sorted (the definition)."""
    kept, mass = [], 0
    for index in sorted(range(len(probs)), key=probs.__getitem__, reverse=True):
        if probs[index] <= 0:
            break
        kept.append(index)
        mass += probs[index]
        if mass >= top_p:
            break
    return kept


def loop_categorical(probs, u):
    target, running, last = u * total_mass(probs), 0, -1
    for index, p in enumerate(probs):
        if p > 0:
            running += p
            last = index
            if running >= target:
                return index
    return last


def test_argmax_fast_path_equals_the_loop_on_ties_signed_zeros_and_nans():
    rng = random.Random(5)
    nan = float("nan")
    cases = [[0.0, -0.0], [-0.0, 0.0], [nan, 1.0, 2.0], [1.0, nan, 2.0, 2.0], [3.0, nan, 3.0], [-math.inf, -math.inf]]
    for _ in range(400):
        values = [
            rng.choice([-1.0, 0.0, -0.0, 2.0, 2.0, nan, -math.inf, rng.random()]) for _ in range(rng.randint(1, 9))
        ]
        cases.append(values)
    for values in cases:
        expected = loop_argmax(values)
        assert argmax(values) == expected, values
        assert argmax(tuple(values)) == expected and argmax(array("d", values)) == expected, values
        assert argmax(iter_only(values)) == expected, values


class iter_only:
    """A sequence that is neither list, tuple nor array (argmax's loop path)."""

    def __init__(self, values):
        self.values = values

    def __len__(self):
        return len(self.values)

    def __getitem__(self, index):
        return self.values[index]


@pytest.mark.parametrize(
    "row, bad",
    [
        ([1.0, math.inf, -math.inf], True),  # the sum is NaN, and +inf is there
        ([1.0, -math.inf], False),
        ([1e308, 1e308], False),  # the sum overflows; no +inf in the row
        ([1.0, float("nan")], True),
        ([math.inf], True),
    ],
)
def test_the_logit_check_refuses_exactly_nan_and_plus_infinity(row, bad):
    if bad:
        with pytest.raises(TargetNumericError):
            FLOAT.check(row)
    else:
        FLOAT.check(row)


def test_top_p_sorting_only_the_large_tokens_keeps_the_full_sorts_prefix():
    rng = random.Random(11)
    for trial in range(300):
        size = rng.randint(2, 300)
        shape = trial % 3
        if shape == 0:  # a peaked row: the prefilter decides
            weights = [rng.random() ** 8 for _ in range(size)]
        elif shape == 1:  # a flat tail holding most of the mass: the full sort decides
            weights = [1e-5] * size
            weights[0] = 1.0
        else:  # ties right at the threshold
            weights = [rng.choice([1.0, 1.0 / 4096, 1.0 / 4097, 0.0]) for _ in range(size)]
            weights[rng.randrange(size)] = 1.0
        total = math.fsum(weights)
        probs = [w / total for w in weights]
        top_p = rng.choice([0.1, 0.5, 0.9, 0.95, 0.999999])
        kept = [i for i, p in enumerate(apply_top_p(probs, top_p)) if p > 0]
        assert kept == sorted(sorted_top_p(probs, as_f32(top_p))), (trial, top_p)


def test_inverse_cdf_by_bisection_equals_the_running_loop():
    rng = random.Random(13)
    for _ in range(500):
        probs = [rng.choice([0.0, 0.0, rng.random(), 1e-9]) for _ in range(rng.randint(1, 40))]
        if not any(probs):
            probs[rng.randrange(len(probs))] = 0.5
        for u in (2.0**-24, 1.0, rng.random() or 1.0, 1 - 2.0**-24):
            assert categorical_from_uniform(probs, u) == loop_categorical(probs, u), (probs, u)
    exact = [Fraction(0), Fraction(1, 3), Fraction(0), Fraction(2, 3)]
    assert [categorical_from_uniform(exact, u) for u in (Fraction(1, 3), Fraction(1, 2), 1)] == [1, 3, 3]


def bits(row):
    return [(type(v).__name__, v.hex() if isinstance(v, float) else v) for v in row]


def test_a_top_p_rows_support_gives_the_full_rows_samples_and_residuals():
    """Sampling from a processed row, and its residual after a rejected draft (a point mass, a full row, a reduced
    row), read only its support: the same tokens and bit-identical residuals as the same row as a plain list (read
    in full); a draft row with a NaN outside the support still fails the round. Fails when the support-only
    residual ignores q, keeps the rejected token, or skips the NaN check."""
    rng = random.Random(17)
    checked = 0
    for trial in range(400):
        size = rng.randint(1, 200)
        logits = [rng.choice([rng.gauss(0, 4), 9.0, 9.0, 0.0, -math.inf]) for _ in range(size)]
        if max(logits) == -math.inf:
            logits[0] = 0.0
        settings = SamplingSettings(temperature=rng.choice([1, 0.7, 0.3]), top_p=rng.choice([0.1, 0.5, 0.9, 0.99]))
        row = process_row(logits, settings)
        plain = list(row)
        assert row.support == tuple(i for i, p in enumerate(plain) if p > 0)
        for u in (2.0**-24, rng.random() or 1.0, 1 - 2.0**-24, 1.0):
            assert categorical_from_uniform(row, u) == categorical_from_uniform(plain, u), (trial, u)
        drafts = [PointMass(token) for token in (rng.randrange(size), row.support[0], row.support[-1])]
        q = [rng.random() ** 3 for _ in range(size)]
        drafts.append(FullRow([x / sum(q) for x in q]))
        ids = sorted(rng.sample(range(size), max(1, size // 3)))
        drafts.append(ReducedRow(ids, [q[i] / sum(q[j] for j in ids) for i in ids]))
        for draft in drafts:
            try:
                expected = positive_residual(plain, draft)
            except ResidualMassError:
                with pytest.raises(ResidualMassError):
                    positive_residual(row, draft)
                continue
            residual = positive_residual(row, draft)
            assert bits(residual) == bits(expected), (trial, draft)
            assert residual.support == tuple(i for i, r in enumerate(expected) if r > 0)
            for u in (2.0**-24, rng.random() or 1.0, 1.0):
                assert categorical_from_uniform(residual, u) == categorical_from_uniform(expected, u)
            checked += 1
        outside = [i for i in range(size) if i not in row.support]
        if outside:
            broken = [x / sum(q) for x in q]
            broken[outside[0]] = math.nan
            with pytest.raises(ResidualMassError):
                positive_residual(row, FullRow(broken))
    assert checked > 1000  # residuals compared (most rows keep more than the rejected token)
