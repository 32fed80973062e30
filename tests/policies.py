"""Scheduler policies for the exactness suites: arbitrary choices that depend only on published state.

ContextHashPolicy picks the source and k from a hash of the published context, so different branches
of the round loop run different sources and lengths in the same request; exactness must not care.
"""

from __future__ import annotations

import zlib
from typing import Sequence

from pyodide_app.proposers.auto import NONE, Choice


class ContextHashPolicy:
    def __init__(self, salt: int = 0):
        self.salt = salt
        self.observed: list[tuple[str, int, int]] = []

    def choose(self, context: Sequence[int], k_cap: int, lookup, neural_available: bool, neural_pending=1) -> Choice:
        h = zlib.crc32(bytes(str((self.salt, tuple(context))), "ascii"))
        sources = (
            ["none"]
            + (["prompt_lookup"] if lookup is not None and lookup[1] else [])
            + (["neural"] if neural_available else [])
        )
        source = sources[h % len(sources)]
        if source == "none":
            return NONE
        cap = min(k_cap, len(lookup[1])) if source == "prompt_lookup" else k_cap
        return Choice(source, 1 + (h >> 8) % cap, lookup[0] if source == "prompt_lookup" else 0)

    def observe(self, choice: Choice, proposed: int, accepted: int, timing=None) -> None:
        self.observed.append((choice.source, proposed, accepted))

    def reset(self) -> None:
        self.observed = []
