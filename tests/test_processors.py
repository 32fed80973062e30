"""Processors: documented order, tie-breaking, exact and float arithmetic, validation."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from pyodide_app.errors import InvalidSettings, TargetNumericError
from pyodide_app.processors import EXACT, FLOAT, SamplingSettings, argmax, process_row


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
