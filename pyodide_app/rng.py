"""Counter-based randomness: Philox4x32-10 keyed by the request seed.

Every random number of a request is a pure function of
    key     = (seed mod 2^32, seed >> 32 mod 2^32)
    counter = (round, position, domain, 0)      the draft's and the acceptance test's streams
    counter = (token, 0, TOKEN_SAMPLE, 0)       a champion sample for the answer's token at context index
                                                `token` (coupled: the same whatever was proposed)
so a draw never depends on how many other draws happened before it. A retried
round reuses its round index and therefore sees the same numbers, and a change
in proposal length cannot shift unrelated draws. The WGSL verify kernel
computes the same function bit for bit.

Uniforms are 24-bit: u = ((word0 >> 8) + 1) / 2^24, in (0, 1], exactly
representable in f32 so the GPU and this module compare identical values.
"""

from __future__ import annotations

from enum import IntEnum

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53  # round multipliers (Salmon et al., SC'11)
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9  # key schedule (Weyl) increments
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10
UNIFORM_BITS = 24


class Domain(IntEnum):
    """Named random streams; the value is counter word 2."""

    DRAFT_SAMPLE = 1  # draft token i of a round          (round, i)
    ACCEPT_UNIFORM = 2  # accept test of draft i          (round, i)
    CORRECTION_SAMPLE = 3  # residual sample at rejection i (round, i)
    TOKEN_SAMPLE = 6  # the champion's own sample of the token at context index t   (t, 0)


def philox4x32_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """One Philox4x32-10 block: 4 counter words, 2 key words -> 4 output words (all u32)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_number in range(PHILOX_ROUNDS):
        if round_number:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        product0 = PHILOX_M0 * c0
        product1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = ((product1 >> 32) ^ c1 ^ k0, product1 & MASK32, (product0 >> 32) ^ c3 ^ k1, product0 & MASK32)
    return c0, c1, c2, c3


def seed_key(seed: int) -> tuple[int, int]:
    """Request seed (0 <= seed < 2^64) -> Philox key words."""
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be in [0, 2^64), got {seed}")
    return seed & MASK32, (seed >> 32) & MASK32


def uniform_from_word(word: int) -> float:
    """u32 -> u in (0, 1] with 24-bit resolution (exact in f32 and f64)."""
    return ((word >> (32 - UNIFORM_BITS)) + 1) / float(1 << UNIFORM_BITS)


class PhiloxStream:
    """The random numbers of one request."""

    def __init__(self, seed: int):
        self.seed = seed
        self.key = seed_key(seed)

    def words(self, domain: Domain, round_index: int, position: int) -> tuple[int, int, int, int]:
        if not (0 <= round_index <= MASK32 and 0 <= position <= MASK32):
            raise ValueError("round and position must fit in u32")
        return philox4x32_10((round_index, position, int(domain), 0), self.key)

    def uniform(self, domain: Domain, round_index: int, position: int) -> float:
        """u in (0, 1] for (domain, round, position)."""
        return uniform_from_word(self.words(domain, round_index, position)[0])


def philox_blocks(cases) -> list[tuple[int, int, int, int]]:
    """philox4x32_10 of each (counter, key) pair: the CPU verifiers' answer to the self-test's known answers."""
    return [philox4x32_10(tuple(counter), tuple(key)) for counter, key in cases]
