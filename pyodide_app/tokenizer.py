"""Byte-level BPE tokenizer (GPT-2 family, SmolLM2's "smollm" pre-tokenizer), standard library only.

encode(text):
  1. special tokens (control tokens such as <|im_start|>) are cut out of the
     text first, leftmost-longest, and map to their ids directly;
  2. pre-tokenization of the rest: every numeric character (categories
     Nd, Nl, No) is its own piece (individual digits), then the GPT-2 split
        's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
     with Unicode categories from `unicodedata`;
  3. each piece's UTF-8 bytes are mapped to printable characters
     (bytes_to_unicode) and merged by BPE rank; the result maps to ids.
decode(ids) inverts step 3 byte-exactly; `StreamDecoder` never emits half a
UTF-8 character.
"""

from __future__ import annotations

import codecs
import json
import unicodedata
from typing import Iterable, Sequence

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
TOKEN_TYPE_CONTROL = 3  # GGUF token type of special tokens
# Pre-tokenizers by their GGUF name -> whether numbers are split into single characters.
PRE_TOKENIZERS = {"smollm": True, "gpt2": False}


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (256 entries)."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {char: byte for byte, char in BYTE_TO_CHAR.items()}


def _is_letter(char: str) -> bool:
    return unicodedata.category(char)[0] == "L"


def _is_number(char: str) -> bool:
    return unicodedata.category(char)[0] == "N"


def _is_space(char: str) -> bool:
    return char.isspace()


def _is_other(char: str) -> bool:
    return not (_is_space(char) or _is_letter(char) or _is_number(char))


def _run(text: str, start: int, accept) -> int:
    """End of the run of characters satisfying `accept` from `start`."""
    end = start
    while end < len(text) and accept(text[end]):
        end += 1
    return end


def gpt2_split(text: str) -> list[str]:
    """The GPT-2 pre-tokenizer regex, evaluated by hand (leftmost-first alternation)."""
    pieces, i, n = [], 0, len(text)
    while i < n:
        end = _match_at(text, i, n)
        pieces.append(text[i:end])
        i = end
    return pieces


def _match_at(text: str, i: int, n: int) -> int:
    for contraction in CONTRACTIONS:
        if text.startswith(contraction, i):
            return i + len(contraction)
    body = i + 1 if text[i] == " " and i + 1 < n else i
    for accept in (_is_letter, _is_number, _is_other):
        end = _run(text, body, accept)
        if end > body:
            return end
    space_end = _run(text, i, _is_space)  # text[i] is whitespace here
    if space_end < n and space_end - i > 1:
        return space_end - 1  # \s+(?!\S): leave the last space to prefix the next word
    return space_end


def split_digits(text: str) -> list[str]:
    """Individual-digits pre-tokenizer: each numeric character (Nd, Nl, No) is isolated."""
    pieces, start = [], 0
    for i, char in enumerate(text):
        if _is_number(char):
            if start < i:
                pieces.append(text[start:i])
            pieces.append(char)
            start = i + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def merge_pair(symbols: Sequence[str], pair: tuple[str, str]) -> list[str]:
    """Merge every occurrence of `pair`, left to right (one BPE step)."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


class Tokenizer:
    def __init__(
        self, tokens: Sequence[str], merges: Sequence[str], special_ids: Iterable[int], pre_tokenizer: str = "smollm"
    ):
        if pre_tokenizer not in PRE_TOKENIZERS:
            raise ValueError(f"pre-tokenizer {pre_tokenizer!r} is not supported (supported: {sorted(PRE_TOKENIZERS)})")
        self.individual_digits = PRE_TOKENIZERS[pre_tokenizer]
        self.tokens = list(tokens)
        self.ids = {token: index for index, token in enumerate(self.tokens)}
        self.ranks = {tuple(merge.split(" ", 1)): rank for rank, merge in enumerate(merges)}
        self.special = {self.tokens[i]: i for i in special_ids}
        self._special_by_first_char: dict[str, list[str]] = {}  # longest first
        for token in sorted(self.special, key=len, reverse=True):
            self._special_by_first_char.setdefault(token[0], []).append(token)
        self._cache: dict[str, tuple[int, ...]] = {}
        self.token_bytes_table = [self._bytes_of(i) for i in range(len(self.tokens))]

    @classmethod
    def from_data(cls, data: dict) -> "Tokenizer":
        """From the package's tokenizer.json: {"tokens", "merges", "token_types", "pre_tokenizer"}."""
        special = [i for i, kind in enumerate(data["token_types"]) if kind == TOKEN_TYPE_CONTROL]
        return cls(data["tokens"], data["merges"], special, data.get("pre_tokenizer", "smollm"))

    @classmethod
    def from_json(cls, text: str) -> "Tokenizer":
        return cls.from_data(json.loads(text))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    # -- encoding ----------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for segment, special_id in self._split_special(text):
            if special_id is not None:
                ids.append(special_id)
                continue
            for digit_piece in split_digits(segment) if self.individual_digits else (segment,):
                for piece in gpt2_split(digit_piece):
                    ids.extend(self._encode_piece(piece))
        return ids

    def _split_special(self, text: str) -> list[tuple[str, int | None]]:
        """Cut special-token strings out of the text (leftmost, then longest)."""
        out, start, i = [], 0, 0
        while i < len(text):
            candidates = self._special_by_first_char.get(text[i], ())
            match = next((s for s in candidates if text.startswith(s, i)), None)
            if match is None:
                i += 1
                continue
            if start < i:
                out.append((text[start:i], None))
            out.append((match, self.special[match]))
            i = start = i + len(match)
        if start < len(text):
            out.append((text[start:], None))
        return out

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        cached = self._cache.get(piece)
        if cached is None:
            symbols = self._bpe("".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")))
            # A byte the vocabulary has no symbol for (SmolLM2 lacks 21: control bytes such as 0x04, and
            # lead bytes of code points >= U+40000) is dropped, as Hugging Face's BPE without an unk token does.
            cached = tuple(self.ids[s] for s in symbols if s in self.ids)
            if len(self._cache) < 100_000:
                self._cache[piece] = cached
        return cached

    def _bpe(self, word: str) -> list[str]:
        symbols = list(word)
        while len(symbols) > 1:
            best_rank, best = None, None
            for pair in zip(symbols, symbols[1:]):
                rank = self.ranks.get(pair)
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best = rank, pair
            if best is None:
                break
            symbols = merge_pair(symbols, best)
        return symbols

    # -- decoding ----------------------------------------------------------

    def _bytes_of(self, token_id: int) -> bytes:
        token = self.tokens[token_id]
        if token in self.special:
            return token.encode("utf-8")
        return bytes(CHAR_TO_BYTE[c] for c in token)

    def token_bytes(self, token_id: int) -> bytes:
        return self.token_bytes_table[token_id]

    def decode(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_bytes_table[i] for i in ids).decode("utf-8", errors="replace")


class StreamDecoder:
    """Token ids in, text out; an incomplete UTF-8 sequence is held until it completes."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: Iterable[int]) -> str:
        return self._decoder.decode(b"".join(self.tokenizer.token_bytes(i) for i in ids))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
