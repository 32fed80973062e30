"""The Llama math in PyTorch, once, for distillation (nanoGPT style: modules at module level).

Shared by the trained draft (Draft, built by distill_train.build_model) and the batched champion
(distill_champion.BatchedChampion). Conventions are the GGUF ones the exporter and the WGSL kernels use:
projections [out, in], RoPE on adjacent pairs (2i, 2i+1) with angles computed in float64.
Imported only by the distillation commands (it needs torch, the `distill` extra).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D] scaled to unit root mean square, times weight [D]."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def inverse_frequencies(theta: float, head_dim: int) -> torch.Tensor:
    """theta^(-2i/head_dim) for i < head_dim/2, float64 [head_dim/2]."""
    return theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """positions (any shape P) -> float32 cos, sin [P, head_dim/2], angles in float64."""
    angles = positions.to(torch.float64)[..., None] * inv_freq
    return torch.cos(angles).float(), torch.sin(angles).float()


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs (2i, 2i+1) of x [..., head_dim] by the angles whose cos/sin broadcast to [..., hd/2]."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def cosine_lr(base: float, elapsed: float, budget: float) -> float:
    """The learning rate schedule: cosine decay from base to 0 over the time budget (no warm-up)."""
    return base * 0.5 * (1 + math.cos(math.pi * min(elapsed / budget, 1.0)))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Block(nn.Module):
    """Pre-norm Llama block: GQA attention with RoPE, then SwiGLU. shape: a distill_train.DraftShape."""

    def __init__(self, shape, eps: float):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = shape.n_heads, shape.n_kv_heads, shape.d_model // shape.n_heads
        d, kv = shape.d_model, shape.n_kv_heads * self.head_dim
        self.attn_norm, self.ffn_norm = RMSNorm(d, eps), RMSNorm(d, eps)
        self.q, self.k, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, kv, bias=False), nn.Linear(d, kv, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, shape.d_ffn, bias=False), nn.Linear(d, shape.d_ffn, bias=False)
        self.down = nn.Linear(shape.d_ffn, d, bias=False)

    def forward(self, x, cos, sin):  # x [B, T, D]; cos, sin [T, hd/2]
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = rope(self.q(h).view(b, t, self.n_heads, self.head_dim).transpose(1, 2), cos, sin)
        k = rope(self.k(h).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = self.v(h).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        group = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Draft(nn.Module):
    """Frozen (projected) champion embeddings, n blocks, a head over a reduced output vocabulary."""

    def __init__(self, shape, embedding, head_init, rope_theta: float, rms_eps: float):
        super().__init__()
        self.embed = nn.Embedding.from_pretrained(torch.tensor(embedding, dtype=torch.float32), freeze=True)
        self.blocks = nn.ModuleList(Block(shape, rms_eps) for _ in range(shape.n_layers))
        self.norm = RMSNorm(shape.d_model, rms_eps)
        self.head = nn.Linear(shape.d_model, len(head_init), bias=False)
        with torch.no_grad():
            self.head.weight.copy_(torch.tensor(head_init, dtype=torch.float32))
        self.register_buffer(
            "inv_freq", inverse_frequencies(rope_theta, shape.d_model // shape.n_heads), persistent=False
        )

    def features(self, ids):  # ids [B, T] -> the head's inputs [B, T, D] (final norm applied)
        cos, sin = rope_tables(torch.arange(ids.shape[1]), self.inv_freq)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.norm(x)

    def forward(self, ids):  # ids [B, T] -> logits [B, T, V']
        return self.head(self.features(ids))
