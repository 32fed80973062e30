"""A model read from disk, independent of its file format (GGUF or Hugging Face folder)."""

from __future__ import annotations

from dataclasses import dataclass, field

import gguf
import numpy as np

from pyodide_app.manifest import ModelConfig


class SourceError(Exception):
    """A model source that cannot be used; the message is one line for the user."""


@dataclass
class Tensor:
    """Raw tensor bytes in a shader-readable format.

    shape is in GGUF order: shape[0] is the contiguous dimension (the input
    dimension of a projection). `data` is uint8 for quantized formats (whole
    blocks, as in GGUF) and float32 for "f32".
    """

    format: str  # "q4_1" | "q8_0" | "f32"
    shape: tuple[int, ...]
    data: np.ndarray

    def raw_bytes(self) -> bytes:
        return np.ascontiguousarray(self.data).tobytes()


@dataclass
class ModelSource:
    origin: str  # the file or folder it came from
    config: ModelConfig
    tokenizer: dict  # tokenizer.json content (see gguf_source.tokenizer_data)
    chat_template: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    license: str | None = None  # the model's licence as its source states it (GGUF general.license)

    def require(self, name: str) -> Tensor:
        tensor = self.tensors.get(name)
        if tensor is None:
            raise SourceError(f"{self.origin}: tensor {name!r} is missing")
        return tensor


def layer_tensor_names(n_layers: int) -> list[str]:
    """The tensors a Llama package must hold, in shard order."""
    names = ["token_embd.weight"]
    for layer in range(n_layers):
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
        ):
            names.append(f"blk.{layer}.{part}.weight")
    names.append("output_norm.weight")
    return names


def quantize(values: np.ndarray, fmt: str) -> Tensor:
    """float32 [out, in] -> GGUF blocks ("q4_1" or "q8_0"); the shape is recorded in GGUF order [in, out]."""
    qtype = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0}[fmt]
    return Tensor(fmt, tuple(reversed(values.shape)), gguf.quants.quantize(np.asarray(values, np.float32), qtype))
