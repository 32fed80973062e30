"""The champion's float32 forward in PyTorch over a batch of independent sequences (distillation data).

Same math as build_tools/reference.py (GGUF layout: projections [out, in], adjacent-pair RoPE,
grouped-query attention, tied or separate head) over the package's dequantized weights, but many
sequences advance together so each weight is read once per step for all of them — on 2 CPU cores
that is ~30x the answers per second of one champion.onnx session (147 vs 5 tok/s). tests/test_distill.py checks its
logits against champion.onnx.

Slots: the KV cache is k, v float32 [n_layers, slots, n_kv_heads, capacity, head_dim]; slot s holds
lengths[s] valid rows. `feed(slots, tokens)` appends tokens [b, T] to b slots (rows lengths..+T-1;
row t attends to rows 0..lengths+t) and returns the logits of each slot's last new token [b, V].
A slot is reused by `clear(slot)`; rows past its length are overwritten later.
"""

from __future__ import annotations

import torch

from .distill_model import inverse_frequencies, rms_norm, rope, rope_tables
from .reference import dequantize


class BatchedChampion:
    def __init__(self, config, tensors, slots: int, capacity: int):
        c = self.config = config

        def w(name):
            return torch.from_numpy(dequantize(tensors[name]).copy())

        self.embed = w("token_embd.weight")  # [V, D]
        self.head = self.embed if c.tied_embeddings else w("output.weight")
        self.final_norm = w("output_norm.weight")
        parts = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        self.layers = [{p: w(f"blk.{i}.{p}.weight") for p in parts} for i in range(c.n_layers)]
        shape = (c.n_layers, slots, c.n_kv_heads, capacity, c.head_dim)
        self.k, self.v = torch.zeros(shape), torch.zeros(shape)
        self.lengths = torch.zeros(slots, dtype=torch.long)
        self.capacity = capacity
        self.inv_freq = inverse_frequencies(c.rope_theta, c.head_dim)

    @staticmethod
    def cached(cache: torch.Tensor, index: torch.Tensor, span: int) -> torch.Tensor:
        """One layer's cache [slots, kvh, capacity, hd] -> rows 0..span-1 of slots `index`: [b, kvh, span, hd].
        A view when the slots are 0..b-1 in order (a full batch: copying 30 layers' keys and values took about
        half of a 64-slot decode step), else a gathered copy."""
        b = len(index)
        if bool((index == torch.arange(b)).all()):
            return cache[:b, :, :span]
        return cache[index, :, :span]

    def clear(self, slot: int) -> None:
        self.lengths[slot] = 0

    @torch.no_grad()
    def feed(self, slots: list[int], tokens: torch.Tensor, first_row: int | None = None) -> torch.Tensor:
        """tokens long [b, T] appended to `slots` -> float32 logits [b, V] of each slot's last new token, or
        with first_row, [b, T - first_row, V] of new tokens first_row..T-1 (teacher forcing)."""
        c = self.config
        b, T = tokens.shape
        index = torch.tensor(slots, dtype=torch.long)
        positions = self.lengths[index][:, None] + torch.arange(T)  # [b, T]
        span = int(positions.max()) + 1
        if span > self.capacity:
            raise ValueError(f"distill champion: a sequence needs {span} KV rows; capacity is {self.capacity}")
        cos, sin = rope_tables(positions, self.inv_freq)  # [b, T, hd/2]
        cos, sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
        allowed = torch.arange(span)[None, None] <= positions[..., None]  # [b, T, span]
        group, scale = c.n_heads // c.n_kv_heads, c.head_dim**-0.5
        x = self.embed[tokens]  # [b, T, D]
        for i, w in enumerate(self.layers):
            h = rms_norm(x, w["attn_norm"], c.rms_eps)
            q = rope((h @ w["attn_q"].T).view(b, T, c.n_heads, c.head_dim), cos, sin)
            k = rope((h @ w["attn_k"].T).view(b, T, c.n_kv_heads, c.head_dim), cos, sin)
            v = (h @ w["attn_v"].T).view(b, T, c.n_kv_heads, c.head_dim)
            self.k[i][index[:, None], :, positions] = k  # -> rows [b, T, kvh, hd]
            self.v[i][index[:, None], :, positions] = v
            keys, values = self.cached(self.k[i], index, span), self.cached(self.v[i], index, span)
            qg = q.view(b, T, c.n_kv_heads, group, c.head_dim).permute(0, 2, 3, 1, 4)  # [b, kvh, g, T, hd]
            scores = torch.einsum("bkgtd,bksd->bkgts", qg, keys) * scale
            scores = scores.masked_fill(~allowed[:, None, None], float("-inf")).softmax(-1)
            attn = torch.einsum("bkgts,bksd->bkgtd", scores, values).permute(0, 3, 1, 2, 4).reshape(b, T, -1)
            x = x + attn @ w["attn_output"].T
            h = rms_norm(x, w["ffn_norm"], c.rms_eps)
            x = x + (torch.nn.functional.silu(h @ w["ffn_gate"].T) * (h @ w["ffn_up"].T)) @ w["ffn_down"].T
        self.lengths[index] += T
        rows = x[:, -1] if first_row is None else x[:, first_row:]
        return rms_norm(rows, self.final_norm, c.rms_eps) @ self.head.T
