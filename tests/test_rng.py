"""Philox4x32-10 against the published Random123 known-answer vectors, and the domain contract."""

from __future__ import annotations

import pytest

from build_tools.golden import RANDOM123_KNOWN_ANSWERS
from pyodide_app.rng import Domain, PhiloxStream, philox4x32_10, seed_key, uniform_from_word


@pytest.mark.parametrize("counter, key, expected", RANDOM123_KNOWN_ANSWERS)
def test_philox4x32_10_known_answers(counter, key, expected):
    assert philox4x32_10(counter, key) == expected


def test_seed_is_split_into_two_key_words():
    assert seed_key(0x0123456789ABCDEF) == (0x89ABCDEF, 0x01234567)
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError):
            seed_key(bad)


def test_counter_layout_is_round_position_domain():
    stream = PhiloxStream(0xDEADBEEF_00C0FFEE)
    assert stream.words(Domain.ACCEPT_UNIFORM, 5, 3) == philox4x32_10((5, 3, int(Domain.ACCEPT_UNIFORM), 0), stream.key)


def test_domains_rounds_and_positions_are_distinct_streams():
    stream = PhiloxStream(7)
    words = {stream.words(domain, r, i) for domain in Domain for r in range(4) for i in range(4)}
    assert len(words) == len(Domain) * 16


def test_uniform_is_24_bit_in_open_closed_unit_interval():
    assert uniform_from_word(0) == 2.0**-24
    assert uniform_from_word(0xFFFFFFFF) == 1.0
    assert uniform_from_word(0x000000FF) == 2.0**-24  # the low 8 bits are dropped
    stream = PhiloxStream(3)
    for r in range(200):
        u = stream.uniform(Domain.TOKEN_SAMPLE, r, 0)
        assert 0 < u <= 1 and (u * 2**24).is_integer()  # exact in f32 too


def test_same_key_and_counter_give_same_numbers():
    a, b = PhiloxStream(99), PhiloxStream(99)
    assert [a.uniform(Domain.DRAFT_SAMPLE, r, 1) for r in range(10)] == [
        b.uniform(Domain.DRAFT_SAMPLE, r, 1) for r in range(10)
    ]
    assert PhiloxStream(100).uniform(Domain.DRAFT_SAMPLE, 0, 1) != a.uniform(Domain.DRAFT_SAMPLE, 0, 1)
