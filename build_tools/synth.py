"""Tiny random Llama champion and draft sharing a tiny byte-level BPE tokenizer (for tests).

Same package format as the real model, built in about a second. The
tokenizer has 3 special tokens, the 256 byte tokens and merges learned from
a fixed little corpus, so encode/decode, chat templates and stop strings all
behave as with a real tokenizer.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from pyodide_app.manifest import ModelConfig
from pyodide_app.tokenizer import BYTE_TO_CHAR, TOKEN_TYPE_CONTROL, gpt2_split, merge_pair, split_digits

from .source import ModelSource, Tensor, layer_tensor_names, quantize

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
CORPUS = (
    "the quick brown fox jumps over the lazy dog. hello world! what is the capital of france? "
    "the capital of france is paris. def main(): return 42 # the answer\n"
    "you are a tiny test model. user assistant system the the the and and of of to to in in"
)
MERGES = 120
TINY = dict(n_layers=2, d_model=64, d_ffn=128, n_heads=4, n_kv_heads=2, context_length=512)


def train_bpe(corpus: str, merges: int) -> tuple[list[str], list[str]]:
    """Classic BPE training on the pre-tokenized corpus: returns (merged tokens, merges)."""
    words = Counter()
    for piece in (p for chunk in split_digits(corpus) for p in gpt2_split(chunk)):
        words[tuple(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))] += 1
    learned, rules = [], []
    for _ in range(merges):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        rules.append(f"{best[0]} {best[1]}")
        learned.append(best[0] + best[1])
        words = Counter({tuple(merge_pair(word, best)): count for word, count in words.items()})
    return learned, rules


def tiny_tokenizer() -> dict:
    learned, merges = train_bpe(CORPUS, MERGES)
    tokens = SPECIAL_TOKENS + [BYTE_TO_CHAR[b] for b in range(256)] + learned
    return {
        "model": "byte_level_bpe",
        "pre_tokenizer": "smollm",
        "tokens": tokens,
        "merges": merges,
        "token_types": [TOKEN_TYPE_CONTROL] * len(SPECIAL_TOKENS) + [1] * (len(tokens) - len(SPECIAL_TOKENS)),
        "bos_id": 1,
        "eos_id": 2,
    }


def random_model(tokenizer: dict, seed: int, n_layers: int, origin: str, **shape) -> ModelSource:
    """shape: overrides of TINY's sizes (d_model, d_ffn, n_heads, n_kv_heads, context_length)."""
    rng = np.random.default_rng(seed)
    sizes = dict(TINY, **shape, n_layers=n_layers)
    d, ffn, heads, kv_heads = sizes["d_model"], sizes["d_ffn"], sizes["n_heads"], sizes["n_kv_heads"]
    head_dim = d // heads
    vocab = len(tokenizer["tokens"])
    config = ModelConfig(
        architecture="llama",
        n_layers=n_layers,
        d_model=d,
        d_ffn=ffn,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        rope_theta=10000.0,
        rms_eps=1e-5,
        context_length=sizes["context_length"],
        vocab_size=vocab,
        tied_embeddings=True,
    )

    def matrix(out_dim: int, in_dim: int, gain: float = 1.0) -> Tensor:
        return quantize(rng.standard_normal((out_dim, in_dim)) * gain / np.sqrt(in_dim), "q4_1")

    def norm() -> Tensor:
        return Tensor("f32", (d,), (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32))

    # Embedding std 0.3 keeps tied-head logits around |10|, where f32 kernels stay within 1e-4 of numpy.
    tensors = {
        "token_embd.weight": quantize(0.3 * rng.standard_normal((vocab, d)), "q8_0"),
        "output_norm.weight": norm(),
    }
    for i in range(n_layers):
        tensors.update(
            {
                f"blk.{i}.attn_norm.weight": norm(),
                f"blk.{i}.ffn_norm.weight": norm(),
                f"blk.{i}.attn_q.weight": matrix(d, d, 2.0),
                f"blk.{i}.attn_k.weight": matrix(kv_heads * head_dim, d, 2.0),
                f"blk.{i}.attn_v.weight": matrix(kv_heads * head_dim, d),
                f"blk.{i}.attn_output.weight": matrix(d, d, 6.0),
                f"blk.{i}.ffn_gate.weight": matrix(ffn, d),
                f"blk.{i}.ffn_up.weight": matrix(ffn, d),
                f"blk.{i}.ffn_down.weight": matrix(d, ffn, 6.0),  # strong layers: greedy output is not a loop
            }
        )
    assert set(tensors) == set(layer_tensor_names(n_layers))
    return ModelSource(origin, config, tokenizer, TEMPLATE, tensors)


def synth_models(seed: int = 0) -> tuple[ModelSource, ModelSource]:
    """(champion, draft): 2-layer and 1-layer random models over the same tiny tokenizer."""
    tokenizer = tiny_tokenizer()
    champion = random_model(tokenizer, seed, TINY["n_layers"], f"synth:{seed}")
    draft = random_model(tokenizer, seed + 1_000_003, 1, f"synth-draft:{seed}")
    return champion, draft
