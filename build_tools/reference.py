"""numpy float32 reference forward of a Llama model (CPython only; the independent check for kernels).

GGUF semantics: projections are stored [out, in] after dequantization; q/k
weights are permuted by llama.cpp's converter, so RoPE rotates ADJACENT pairs
(x[2i], x[2i+1]) with angle pos * theta^(-2i/head_dim). Grouped-query
attention: query head h reads KV head h // (n_heads / n_kv_heads). Tied
embeddings: logits = final_norm(x) @ token_embd^T.

KV cache: k, v float32 [n_layers, n_kv_heads, capacity, head_dim]. A call with
T tokens at `position` writes rows position..position+T-1 and row t attends
to rows 0..position+t (causal). Rows past the committed length are simply
overwritten later: rollback is logical.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import gguf
import numpy as np

from pyodide_app.champion import CachedPrefix
from pyodide_app.manifest import FORMATS, ModelConfig, read_tensor_bytes
from pyodide_app.package_check import load_manifest

from .source import Tensor

QTYPES = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0}


def dequantize(tensor: Tensor) -> np.ndarray:
    """float32 array of shape reversed(tensor.shape), e.g. [out, in] for a projection."""
    shape = tuple(reversed(tensor.shape))
    if tensor.format == "f32":
        return np.asarray(tensor.data, dtype=np.float32).reshape(shape)
    block_elements, block_bytes = FORMATS[tensor.format]
    rows = int(np.prod(shape[:-1]))
    raw = np.asarray(tensor.data, dtype=np.uint8).reshape(rows, shape[-1] // block_elements * block_bytes)
    return gguf.quants.dequantize(raw, QTYPES[tensor.format]).astype(np.float32).reshape(shape)


@dataclass
class KVCache:
    k: np.ndarray  # [n_layers, n_kv_heads, capacity, head_dim]
    v: np.ndarray

    @property
    def capacity(self) -> int:
        return self.k.shape[2]


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    variance = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x / np.sqrt(variance + np.float32(eps))) * weight


def rope_adjacent(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """x [T, heads, head_dim]; rotate pairs (2i, 2i+1) by positions * theta^(-2i/head_dim)."""
    head_dim = x.shape[-1]
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, head_dim/2]
    cos = np.cos(angles).astype(np.float32)[:, None, :]
    sin = np.sin(angles).astype(np.float32)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def silu(x: np.ndarray) -> np.ndarray:
    return x / (np.float32(1) + np.exp(-x))


class ReferenceModel:
    """Float32 forward over dequantized weights; `n_layers` < config's gives an early-exit model."""

    def __init__(self, config: ModelConfig, tensors: Mapping[str, Tensor], n_layers: int | None = None):
        self.config = config
        self.n_layers = config.n_layers if n_layers is None else n_layers
        self.vocab_size = config.vocab_size
        self.embed = dequantize(tensors["token_embd.weight"])  # [vocab, d_model]
        self.head = self.embed if config.tied_embeddings else dequantize(tensors["output.weight"])
        self.final_norm = dequantize(tensors["output_norm.weight"])
        self.layers = [
            {
                part: dequantize(tensors[f"blk.{i}.{part}.weight"])
                for part in (
                    "attn_norm",
                    "attn_q",
                    "attn_k",
                    "attn_v",
                    "attn_output",
                    "ffn_norm",
                    "ffn_gate",
                    "ffn_up",
                    "ffn_down",
                )
            }
            for i in range(self.n_layers)
        ]

    def new_cache(self, capacity: int) -> KVCache:
        c = self.config
        shape = (self.n_layers, c.n_kv_heads, capacity, c.head_dim)
        return KVCache(np.zeros(shape, np.float32), np.zeros(shape, np.float32))

    def forward(self, tokens: Sequence[int], cache: KVCache, position: int) -> np.ndarray:
        """Logits float32 [T, vocab] for T tokens at positions position..position+T-1."""
        c = self.config
        T = len(tokens)
        if position + T > cache.capacity:
            raise ValueError(f"KV cache holds {cache.capacity} rows; call needs {position + T}")
        positions = np.arange(position, position + T)
        x = self.embed[np.asarray(tokens)]  # [T, d_model]
        group = c.n_heads // c.n_kv_heads
        scale = np.float32(1.0 / np.sqrt(c.head_dim))
        causal = positions[:, None] >= np.arange(position + T)[None, :]  # [T, keys]
        for i, w in enumerate(self.layers):
            h = rms_norm(x, w["attn_norm"], c.rms_eps)
            q = rope_adjacent((h @ w["attn_q"].T).reshape(T, c.n_heads, c.head_dim), positions, c.rope_theta)
            k = rope_adjacent((h @ w["attn_k"].T).reshape(T, c.n_kv_heads, c.head_dim), positions, c.rope_theta)
            v = (h @ w["attn_v"].T).reshape(T, c.n_kv_heads, c.head_dim)
            cache.k[i, :, position : position + T] = k.transpose(1, 0, 2)
            cache.v[i, :, position : position + T] = v.transpose(1, 0, 2)
            keys = cache.k[i, :, : position + T]  # [kv_heads, keys, head_dim]
            values = cache.v[i, :, : position + T]
            qg = q.transpose(1, 0, 2).reshape(c.n_kv_heads, group, T, c.head_dim)
            scores = np.einsum("kgtd,ksd->kgts", qg, keys) * scale
            scores = np.where(causal[None, None], scores, -np.inf)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            attn = np.einsum("kgts,ksd->kgtd", scores, values).reshape(c.n_heads, T, c.head_dim)
            x = x + attn.transpose(1, 0, 2).reshape(T, c.d_model) @ w["attn_output"].T
            h = rms_norm(x, w["ffn_norm"], c.rms_eps)
            x = x + (silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
        return rms_norm(x, self.final_norm, c.rms_eps) @ self.head.T


class CachedLogits:
    """`LogitsModel` over a ReferenceModel: reuses the KV cache for the longest common prefix."""

    def __init__(self, model: ReferenceModel, capacity: int):
        self.model = model
        self.vocab_size = model.vocab_size
        self.cache = model.new_cache(capacity)
        self.kv = CachedPrefix()  # the tokens whose KV rows are valid
        self.calls = 0

    def logits(self, tokens: Sequence[int]) -> list[float]:
        tokens = list(tokens)
        common = min(self.kv.keep_common(tokens), len(tokens) - 1)  # always recompute at least the last token
        rows = self.model.forward(tokens[common:], self.cache, common)
        self.kv.write(common, tokens[common:])
        self.calls += 1
        return rows[-1].astype(np.float64).tolist()


def greedy_generate(model: ReferenceModel, prompt: Sequence[int], max_new: int, eos_ids=()) -> list[int]:
    cache = model.new_cache(len(prompt) + max_new)
    logits = model.forward(prompt, cache, 0)[-1]
    out: list[int] = []
    for _ in range(max_new):
        token = int(np.argmax(logits))
        out.append(token)
        if token in eos_ids or len(out) == max_new:
            break
        logits = model.forward([token], cache, len(prompt) + len(out) - 1)[-1]
    return out


def read_champion(folder: Path, manifest: dict | None = None) -> tuple[ModelConfig, dict[str, Tensor]]:
    """Config and tensors (raw blocks) of a package's champion, for the numpy reference."""
    folder = Path(folder)
    manifest = manifest or load_manifest(folder)
    config = ModelConfig.from_dict(manifest["champion"]["config"])
    tensors = {}
    for name, entry in manifest["champion"]["tensors"].items():
        raw = read_tensor_bytes(folder, entry)
        data = np.frombuffer(raw, dtype=np.float32 if entry["format"] == "f32" else np.uint8)
        tensors[name] = Tensor(entry["format"], tuple(entry["shape"]), data)
    return config, tensors
