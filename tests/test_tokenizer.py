"""The stdlib tokenizer against Hugging Face `tokenizers` built from the same vocabulary and merges."""

from __future__ import annotations

import time

import pytest
from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from build_tools.gguf_source import GGUFFile, default_champion_path, tokenizer_data
from pyodide_app.tokenizer import BYTE_TO_CHAR, StreamDecoder, Tokenizer, gpt2_split

from .tokenizer_corpus import corpus


@pytest.fixture(scope="module")
def smollm_data():
    return tokenizer_data(GGUFFile(default_champion_path()))


@pytest.fixture(scope="module")
def ours(smollm_data):
    return Tokenizer.from_data(smollm_data)


@pytest.fixture(scope="module")
def reference(smollm_data):
    tokens, merges = smollm_data["tokens"], smollm_data["merges"]
    hf = HFTokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(" ", 1)) for m in merges]))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    special = [tokens[i] for i, kind in enumerate(smollm_data["token_types"]) if kind == 3]
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return hf


def test_corpus_is_large_and_hard():
    texts = corpus()
    assert len(texts) >= 500
    assert len(set(texts)) >= 480


def test_token_ids_match_hugging_face_on_the_corpus(ours, reference):
    mismatches = [
        (t, reference.encode(t).ids, ours.encode(t)) for t in corpus() if reference.encode(t).ids != ours.encode(t)
    ]
    assert not mismatches, mismatches[:3]


def test_bytes_without_a_symbol_are_dropped_like_hugging_face_does(ours, reference):
    """SmolLM2's vocabulary has no symbol for 21 bytes (control bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1d; lead
    bytes of code points >= U+40000). Text holding them (found in real documents: a prompt built from a
    gettext catalog had U+0004) encodes as the reference does, dropping them, instead of raising KeyError."""
    missing = [b for b in range(32) if BYTE_TO_CHAR[b] not in ours.ids]
    assert missing == [4, 6, 19, 20, 22, 29]
    texts = ["a\x04b", "\x04", "x\x06 y\x13\x14z", "end\x16\x1d.", "rare \U00040000 plane", "<|im_start|>\x04"]
    for text in texts:
        assert ours.encode(text) == reference.encode(text).ids, text


def test_decode_inverts_encode(ours):
    for text in corpus():
        assert ours.decode(ours.encode(text)) == text


def test_special_tokens_inside_text_are_single_ids(ours):
    assert ours.encode("<|im_start|>user\nhi<|im_end|>")[0] == 1
    assert ours.encode("a<|im_end|>b")[1] == 2
    assert 1 not in ours.encode("<|im_start|")


def test_stream_decoder_never_emits_half_a_character(ours):
    text = "héllo 👨‍👩‍👧 日本 ✓"
    ids = ours.encode(text)
    stream = StreamDecoder(ours)
    pieces = [stream.feed([i]) for i in ids] + [stream.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    # A byte-level token that is half of "é" yields nothing until its partner arrives.
    half = [i for i in range(ours.vocab_size) if ours.token_bytes(i) == b"\xc3"]
    assert half and StreamDecoder(ours).feed(half) == ""


def test_gpt2_split_examples():
    assert gpt2_split("Hello  world") == ["Hello", " ", " world"]
    assert gpt2_split("it's") == ["it", "'s"]
    assert gpt2_split("a\n\nb") == ["a", "\n", "\n", "b"]  # only " " prefixes a word
    assert gpt2_split("a   b") == ["a", "  ", " b"]


def test_encoding_speed_is_reported(ours, capsys):
    text = "\n".join(corpus())  # distinct words: mostly cold BPE cache
    fresh = Tokenizer(
        ours.tokens, [" ".join(p) for p in sorted(ours.ranks, key=ours.ranks.get)], list(ours.special.values())
    )
    start = time.perf_counter()
    ids = fresh.encode(text)
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(
            f"\n[tokenizer] {len(ids)} tokens in {elapsed:.3f} s: {len(ids) / elapsed:,.0f} tokens/s (fresh tokenizer, "
            "mostly distinct words, CPython)"
        )
    assert ids == ours.encode(text)
