"""A pure-Python table model: token sequence -> next-token logits.

Rows are keyed by context suffixes; a lookup uses the longest key that is a
suffix of the sequence (the empty key is the fallback). A table keyed by
whole prefixes is an exact autoregressive model; one keyed by the last n
tokens is an n-gram model. Values are float logits, or Fractions w = exp(l)
for exact arithmetic (processors.EXACT). Usable as champion
(`ReferenceChampion`) and as draft (`ModelDraft`).
"""

from __future__ import annotations

import itertools
import random
from typing import Mapping, Sequence


class TableModel:
    def __init__(self, vocab_size: int, rows: Mapping[tuple[int, ...], Sequence]):
        if () not in rows:
            raise ValueError("a table model needs a fallback row for the empty context ()")
        for key, row in rows.items():
            if len(row) != vocab_size:
                raise ValueError(f"row for {key} has {len(row)} entries, vocabulary is {vocab_size}")
        self.vocab_size = vocab_size
        self.rows = {tuple(key): list(row) for key, row in rows.items()}
        self.longest_key = max(len(key) for key in self.rows)

    def logits(self, tokens: Sequence[int]) -> list:
        for length in range(min(self.longest_key, len(tokens)), -1, -1):
            row = self.rows.get(tuple(tokens[len(tokens) - length :]))
            if row is not None:
                return row
        raise AssertionError("unreachable: the empty key always matches")

    @classmethod
    def random_ngram(cls, vocab_size: int, order: int, seed: int, levels: int = 9, spread: float = 4.0) -> "TableModel":
        """Random n-gram model over all contexts of length <= order.

        Logits are drawn from `levels` evenly spaced values in [-spread, spread],
        so exact ties between tokens are common (tie-breaking gets exercised).
        """
        rng = random.Random(seed)
        step = 2 * spread / (levels - 1)
        rows = {}
        for length in range(order + 1):
            for key in itertools.product(range(vocab_size), repeat=length):
                rows[key] = [-spread + step * rng.randrange(levels) for _ in range(vocab_size)]
        return cls(vocab_size, rows)
