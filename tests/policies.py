"""Scheduler policies for the exactness suites: arbitrary choices that depend only on published state.

ContextHashPolicy picks the source and k from a hash of the published context, so different branches
of the round loop run different sources and lengths in the same request; exactness must not care. Some of its
neural rounds carry a keep rule (as auto's confident extension does) that drafts past k or stops on a hash of the
context and the entropies of the rows drafted so far: any rule on those keeps the champion's law.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Sequence

from pyodide_app.proposers.auto import NONE, Choice


@dataclass(frozen=True)
class HashKeep:
    """Keeps the first k drafts; a later one where a hash of (salt, context, the rows' entropies) says so."""

    salt: int
    context: tuple[int, ...]
    k: int

    def __call__(self, entropies: Sequence[float]) -> bool:
        if len(entropies) <= self.k:
            return True
        key = (self.salt, self.context, tuple(round(bits, 9) for bits in entropies))
        return zlib.crc32(bytes(str(key), "ascii")) % 3 != 0


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
        k = 1 + (h >> 8) % cap
        if source == "neural" and (h >> 16) % 2:  # drafts up to k_cap, past k on the hash
            return Choice(source, k, extend=HashKeep(self.salt, tuple(context), k))
        return Choice(source, k, lookup[0] if source == "prompt_lookup" else 0)

    def observe(self, choice: Choice, proposed: int, accepted: int, timing=None) -> None:
        self.observed.append((choice.source, proposed, accepted))

    def reset(self) -> None:
        self.observed = []
