"""Logit processors: raw logits row -> the processed distribution that sampling uses.

Order (fixed, and the same in the WGSL verify kernel):
  1. repetition penalty r over the set of tokens in the row's history
     (prompt + output + drafts before this row): logit > 0 -> logit / r,
     otherwise logit * r (CTRL / Hugging Face convention);
  2. temperature T: T == 0 means greedy, the processed row is a point mass on
     the argmax (lowest index wins ties) and steps 3-5 do not apply;
     otherwise logit / T;
  3. top-k: keep the k largest logits, ties broken by lowest index (k = 0: off);
  4. softmax over the kept tokens;
  5. top-p: order by (probability desc, index asc), keep the shortest prefix
     whose mass reaches p (always at least one token), renormalise (p = 1: off).

The arithmetic is pluggable: `FLOAT` works on float logits (max-shifted
softmax, fsum); `EXACT` represents a logit l by the Fraction w = exp(l), so
tests get exact rational distributions from the very same code.
In the page, the CPU champion's sampled rows without a repetition penalty are processed by the same steps
in JS (web/row_processing.js, processedRow: tests/test_row_processing.py holds it to this module).
"""

from __future__ import annotations

import math
import struct
from array import array
from dataclasses import dataclass
from fractions import Fraction
from itertools import compress, repeat
from numbers import Real
from operator import le, sub, truediv
from typing import Iterable, Sequence

from .errors import InvalidSettings, TargetNumericError
from .sampling import supported_row, total_mass

# Below this, logit / T can overflow f32 on the GPU (and floats here) for large logits; such a
# temperature is greedy in all but name, so it is refused rather than computed differently per backend.
MIN_TEMPERATURE = 1e-3


def as_f32(value: float) -> float:
    """The nearest float32: the WGSL kernel compares against top_p as an f32, and so does this module."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


@dataclass(frozen=True)
class SamplingSettings:
    """Decoding policy of one side (champion or draft)."""

    temperature: Real = 1.0  # 0 -> greedy
    top_k: int = 0  # 0 -> off
    top_p: Real = 1.0  # 1 -> off
    repetition_penalty: Real = 1.0  # 1 -> off

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def validate(self) -> "SamplingSettings":
        """Raise InvalidSettings with a message naming the field; return self."""
        if not _finite(self.temperature) or self.temperature < 0:
            raise InvalidSettings(f"temperature must be >= 0, got {self.temperature}")
        if 0 < self.temperature < MIN_TEMPERATURE:
            raise InvalidSettings(
                f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}, got {self.temperature}"
            )
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise InvalidSettings(f"top_k must be an integer >= 0, got {self.top_k!r}")
        if not _finite(self.top_p) or not 0 < self.top_p <= 1:
            raise InvalidSettings(f"top_p must be in (0, 1], got {self.top_p}")
        if not _finite(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise InvalidSettings(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        return self


def _finite(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


class FloatLogits:
    """Logits as floats; a masked token is -inf."""

    masked = -math.inf

    @staticmethod
    def scale(logit: float, factor) -> float:
        return logit * float(factor)

    @staticmethod
    def is_positive(logit: float) -> bool:
        return logit > 0

    @staticmethod
    def check(logits: Sequence[float]) -> None:
        # A plain sum is NaN or +inf whenever a NaN or a +inf is in the row; finite or -inf, neither is
        # (one C-level pass). Only then is the slow scan needed, to tell them from an overflowing sum.
        total = sum(logits)
        if (total != total or total == math.inf) and any(math.isnan(x) or x == math.inf for x in logits):
            raise TargetNumericError("logits contain NaN or +inf")

    @staticmethod
    def divide_row(logits: Sequence[float], divisor) -> list[float]:
        """Every logit divided (as the WGSL kernel does, not multiplied by 1/T; -inf stays -inf), in one
        C-level pass."""
        return list(map(truediv, logits, repeat(float(divisor))))

    @staticmethod
    def softmax(logits: Sequence[float]) -> list[float]:
        top = max(logits)
        weights = list(map(math.exp, map(sub, logits, repeat(top))))  # a masked -inf gives exp(-inf) = 0.0
        total = math.fsum(weights)
        return list(map(truediv, weights, repeat(total)))


class ExactWeights:
    """A logit l is carried as the Fraction w = exp(l); a masked token is w = 0.

    Scaling a logit by a rational a/b raises w to a/b, which must stay rational:
    tests pick weights that are perfect b-th powers.
    """

    masked = Fraction(0)

    @staticmethod
    def scale(weight: Fraction, factor) -> Fraction:
        factor = Fraction(factor)
        if weight == 0:
            return weight
        root = Fraction(
            _exact_root(weight.numerator, factor.denominator), _exact_root(weight.denominator, factor.denominator)
        )
        return root**factor.numerator

    @classmethod
    def divide(cls, weight: Fraction, divisor) -> Fraction:
        return cls.scale(weight, 1 / Fraction(divisor))

    @classmethod
    def divide_row(cls, weights: Sequence[Fraction], divisor) -> list[Fraction]:
        return [cls.divide(w, divisor) for w in weights]  # a masked 0 stays 0

    @staticmethod
    def is_positive(weight: Fraction) -> bool:
        return weight > 1

    @staticmethod
    def check(weights: Sequence[Fraction]) -> None:
        if any(w < 0 for w in weights):
            raise TargetNumericError("exact weights must be >= 0")

    @staticmethod
    def softmax(weights: Sequence[Fraction]) -> list[Fraction]:
        total = sum(weights)
        return [w / total for w in weights]


def _exact_root(value: int, degree: int) -> int:
    root = round(value ** (1.0 / degree))
    for candidate in (root - 1, root, root + 1):
        if candidate >= 0 and candidate**degree == value:
            return candidate
    raise ValueError(f"{value} is not a perfect power of degree {degree}")


FLOAT = FloatLogits()
EXACT = ExactWeights()


def argmax(values: Sequence) -> int:
    """Index of the largest value; the lowest index wins ties. Lists, tuples and arrays take the C-level
    path: max() keeps its current item unless a later one compares greater, as the loop below does, and
    index() finds the first item equal to it, which is that item's first occurrence (a NaN, equal to
    nothing, is left to the loop)."""
    if isinstance(values, (list, tuple, array)) and values:
        best_value = max(values)
        if best_value == best_value:
            return values.index(best_value)
    best = 0
    for index in range(1, len(values)):
        if values[index] > values[best]:
            best = index
    return best


def point_mass(size: int, index: int, ops=FLOAT) -> list:
    one, zero = (Fraction(1), Fraction(0)) if ops is EXACT else (1.0, 0.0)
    row = [zero] * size
    row[index] = one
    return row


def apply_repetition_penalty(logits: list, penalty, history: Iterable[int], ops=FLOAT) -> list:
    if penalty == 1:
        return logits
    out = list(logits)
    inverse = 1 / Fraction(penalty) if ops is EXACT else 1.0 / penalty
    for token in set(history):
        if ops.is_positive(out[token]):
            out[token] = ops.scale(out[token], inverse)
        else:
            out[token] = ops.scale(out[token], penalty)
    return out


def apply_top_k(logits: list, k: int, ops=FLOAT) -> list:
    if k == 0 or k >= len(logits):
        return logits
    # Stable sort, descending: equal logits keep index order, so lower ids win.
    kept = set(sorted(range(len(logits)), key=logits.__getitem__, reverse=True)[:k])
    return [x if i in kept else ops.masked for i, x in enumerate(logits)]


def _nucleus(probs: list, order: Iterable[int], top_p) -> tuple[list[int], bool]:
    """The shortest prefix of `order` whose running mass reaches top_p (stopping at a zero), and whether
    it got there (False: `order` ran out first)."""
    kept, mass = [], 0
    for index in order:
        if probs[index] <= 0:
            return kept, True
        kept.append(index)
        mass += probs[index]
        if mass >= top_p:
            return kept, True
    return kept, False


def apply_top_p(probs: list, top_p) -> list:
    if top_p >= 1:
        return probs
    if isinstance(top_p, float):
        top_p = as_f32(top_p)  # the threshold the GPU uses; exact (Fraction) settings stay exact
    # The order is by probability, descending, ties by index ascending. First only the tokens at or above
    # a threshold are sorted: every other token is smaller than all of them, so while the running mass
    # reaches top_p among them, the prefix is the full order's. Else the whole vocabulary is sorted.
    threshold = max(probs) / 4096
    candidates = list(compress(range(len(probs)), map(le, repeat(threshold), probs))) if threshold > 0 else []
    kept, reached = _nucleus(probs, sorted(candidates, key=probs.__getitem__, reverse=True), top_p)
    if not reached:
        kept, _ = _nucleus(probs, sorted(range(len(probs)), key=probs.__getitem__, reverse=True), top_p)
    kept_mass = total_mass([probs[i] for i in kept])
    return supported_row(len(probs), probs[0] * 0, {index: probs[index] / kept_mass for index in kept})


def penalised_row(logits: Sequence, settings: SamplingSettings, history: Iterable[int] = (), ops=FLOAT) -> list:
    """A row's logits checked (TargetNumericError on NaN, +inf, or every token masked) and repetition-penalised."""
    ops.check(logits)
    row = apply_repetition_penalty(list(logits), settings.repetition_penalty, history, ops)
    if max(row) == ops.masked:  # every token masked (no NaN here: checked above)
        raise TargetNumericError("no valid token in the row")
    return row


def greedy_token(logits: Sequence, settings: SamplingSettings, history: Iterable[int] = (), ops=FLOAT) -> int:
    """The greedy choice of one row: the index process_row's point mass would sit at, without the row."""
    return argmax(penalised_row(logits, settings, history, ops))


def process_row(logits: Sequence, settings: SamplingSettings, history: Iterable[int] = (), ops=FLOAT) -> list:
    """Raw logits (or exact weights) of one row -> processed probabilities (same length)."""
    if settings.greedy:
        return point_mass(len(logits), greedy_token(logits, settings, history, ops), ops)
    row = penalised_row(logits, settings, history, ops)
    if settings.temperature != 1:
        row = ops.divide_row(row, settings.temperature)
    row = apply_top_k(row, settings.top_k, ops)
    probs = ops.softmax(row)
    probs = apply_top_p(probs, settings.top_p)
    # Probabilities are >= 0, so their plain sum (one C-level pass) is NaN exactly when one of them is,
    # and > 0 exactly when one of them is.
    if not sum(probs) > 0:
        raise TargetNumericError("processed row has NaN or no mass")
    return probs
