"""Stop rules, applied to the tokens a round wants to emit before anything is published.

An answer ends at the first of: an EOS token (kept in the output), a token
whose bytes complete a stop string (kept; the text layer hides the stop
string), or the output reaching its token limit. Tokens after that point,
including a correction or bonus token, are dropped: no bonus after an
accepted stop. Stop strings match UTF-8 bytes, so a stop split across
tokens, or inside a multi-byte character, is still found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


@dataclass(frozen=True)
class StopPolicy:
    eos_ids: frozenset[int]
    stop_strings: tuple[bytes, ...]
    max_new_tokens: int  # output-token limit (already capped by the context limit)
    token_bytes: Callable[[int], bytes]

    @classmethod
    def build(cls, eos_ids, stop_strings: Sequence[str], max_new_tokens: int, token_bytes) -> "StopPolicy":
        encoded = tuple(s.encode("utf-8") for s in stop_strings if s)
        return cls(frozenset(eos_ids), encoded, max_new_tokens, token_bytes)

    def apply(self, output: Sequence[int], new_tokens: Sequence[int]) -> tuple[tuple[int, ...], str | None]:
        """Truncate `new_tokens` at the first stop; return (kept, finish_reason or None)."""
        window = self._tail_bytes(output)
        for i, token in enumerate(new_tokens):
            kept = tuple(new_tokens[: i + 1])
            if token in self.eos_ids:
                return kept, FINISH_STOP
            piece = self.token_bytes(token)
            window += piece
            # A new match must end inside `piece`: look only at the last len(stop) + len(piece) - 1 bytes.
            if piece and any(stop in window[-(len(stop) + len(piece) - 1) :] for stop in self.stop_strings):
                return kept, FINISH_STOP
            if len(output) + i + 1 >= self.max_new_tokens:
                return kept, FINISH_LENGTH
        return tuple(new_tokens), None

    def _tail_bytes(self, output: Sequence[int]) -> bytes:
        """The last bytes of the output that a stop string could still extend (len(longest) - 1)."""
        need = max((len(s) for s in self.stop_strings), default=1) - 1
        pieces, size = [], 0
        for token in reversed(output):
            if size >= need:
                break
            piece = self.token_bytes(token)
            pieces.append(piece)
            size += len(piece)
        return b"".join(reversed(pieces))
