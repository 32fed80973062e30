"""Prompt lookup proposals and stop rules."""

from __future__ import annotations

import random

import pytest

from pyodide_app.acceptance import PointMass
from pyodide_app.proposers import PromptLookup
from pyodide_app.stops import StopPolicy


def propose(context, k, **kwargs):
    return PromptLookup(**kwargs).propose(context, k, 0, None)


def test_prompt_lookup_copies_the_most_recent_earlier_match():
    context = [5, 6, 7, 1, 5, 6, 8, 2, 9, 5, 6]
    proposal = propose(context, 3)
    assert proposal.tokens == (8, 2, 9)  # latest "5 6" before the end is followed by 8 2 9
    assert all(isinstance(row, PointMass) and row.token == t for row, t in zip(proposal.rows, proposal.tokens))


def test_prompt_lookup_prefers_longer_ngrams():
    context = [1, 2, 3, 9, 9, 0, 3, 4, 4, 1, 2, 3]
    # n=3 "1 2 3" matches at 0 (-> 9 9), although "3" alone matches more recently (-> 4 4).
    assert propose(context, 2, n_max=3).tokens == (9, 9)
    assert propose(context, 2, n_max=1).tokens == (4, 4)


def test_prompt_lookup_stops_at_the_end_of_the_context_and_at_k():
    assert propose([1, 2, 1], 5).tokens == (2, 1)
    assert propose([1, 2, 3, 1], 1).tokens == (2,)
    assert propose([1, 2, 3, 1], 0).tokens == ()


def test_prompt_lookup_without_a_match_proposes_nothing():
    assert propose([1, 2, 3, 4], 4).tokens == ()
    assert propose([7], 4).tokens == ()
    assert propose([1, 2, 3, 4, 2], 4, n_max=3, n_min=2).tokens == ()


def reference_match(context, k, n_max, n_min):
    """The definition, n by n: the largest start j < len - n with context[j:j+n] == context[-n:]."""
    for n in range(min(n_max, len(context) - 1), n_min - 1, -1):
        starts = [j for j in range(len(context) - n) if context[j : j + n] == context[-n:]]
        if starts:
            return n, tuple(context[starts[-1] + n : starts[-1] + n + k])
    return None


def test_the_one_pass_match_is_the_definition():
    """On 3,000 random contexts over small alphabets (many repeats, overlapping matches): the same n and
    continuation as the n-by-n definition. Fails if, e.g., the pass keeps the earliest of the longest
    matches, or lets an occurrence end at the last token (checked both)."""
    rng = random.Random(5)
    for _ in range(3000):
        context = [rng.randrange(rng.choice([2, 3, 6])) for _ in range(rng.randrange(0, 40))]
        n_max, k = rng.randint(1, 7), rng.randint(1, 6)
        n_min = rng.randint(1, n_max)
        assert PromptLookup(n_max, n_min).match(context, k) == reference_match(context, k, n_max, n_min), context


def test_prompt_lookup_rejects_bad_n():
    with pytest.raises(ValueError):
        PromptLookup(n_max=1, n_min=2)


PIECES = {0: b"x", 1: b"<", 2: b"/s", 3: b">", 4: b"\xc3", 5: b"\xa9", 6: b"", 7: b"EOS"}


def policy(stop_strings=(), eos=(7,), limit=100):
    return StopPolicy.build(eos, stop_strings, limit, PIECES.__getitem__)


def test_eos_is_kept_and_ends_the_answer():
    assert policy().apply([0], [0, 7, 0]) == ((0, 7), "stop")


def test_stop_string_split_across_tokens_and_rounds():
    stop = policy(["</s>"])
    assert stop.apply([], [0, 1, 2]) == ((0, 1, 2), None)
    assert stop.apply([0, 1, 2], [6, 3, 0]) == ((6, 3), "stop")  # empty piece between, then ">"


def test_stop_string_inside_a_multibyte_character():
    assert policy(["\xe9"]).apply([0, 4], [5, 0]) == ((5,), "stop")


def test_earlier_text_does_not_retrigger():
    # "x<" is in the output already; the next token alone must not re-match it.
    assert policy(["x<"]).apply([0], [1, 0, 0]) == ((1,), "stop")
    assert policy(["x<"]).apply([], [0, 0, 3]) == ((0, 0, 3), None)


def test_token_limit_cuts_inside_the_accepted_prefix():
    assert policy(limit=3).apply([0], [0, 0, 0, 0]) == ((0, 0), "length")
    assert policy(limit=3).apply([0, 0], [7]) == ((7,), "stop")  # EOS wins when both apply
