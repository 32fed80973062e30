"""The float32-weights champion (export_onnx dense=True) on onnxruntime, its weights built from the package's
champion shards: the graph file holds no weights, only external-data references named after GGUF tensors
(`external_weights`: initializer -> tensor), which are dequantised here (d*q + m in float32, GGUF row order)
and handed to onnxruntime as external initializers. The same download serves the WebGPU and CPU paths.

Memory: ~4 bytes per weight (SmolLM2: ~540 MB), while onnxruntime copies them into the session.
`open_runtime` gives a package's CPU champion: this graph, or champion.onnx (compact) when asked or absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from ..manifest import read_tensor_bytes
from .onnx_champion import OnnxChampionRuntime

BLOCK = 32


def dequantize(raw: bytes, fmt: str, shape: list[int]) -> np.ndarray:
    """GGUF blocks -> float32 [rows, cols] in GGUF row order (shape is GGUF order: shape[0] = cols).
    Q4_1 block: d f16, m f16, 16 bytes (element j: low nibble of byte j, element j+16: its high nibble),
    value d*q + m. Q8_0 block: d f16, 32 int8, value d*q. Both rounded once per operation in float32."""
    cols, rows = shape[0], int(np.prod(shape[1:]))
    if fmt == "f32":
        return np.frombuffer(raw, np.float32).reshape(rows, cols)
    if fmt == "q4_1":
        blocks = np.frombuffer(raw, np.uint8).reshape(rows, cols // BLOCK, 20)
        d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)
        m = blocks[..., 2:4].copy().view(np.float16).astype(np.float32)
        qs = blocks[..., 4:20]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)
        return (d * q + m).reshape(rows, cols)
    if fmt == "q8_0":
        blocks = np.frombuffer(raw, np.uint8).reshape(rows, cols // BLOCK, 34)
        d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)
        q = blocks[..., 2:34].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(rows, cols)
    raise ValueError(f"unknown tensor format {fmt!r}")


def open_dense_runtime(folder: Path, manifest: dict, graph: Path, entry: dict, threads: int = 1) -> OnnxChampionRuntime:
    """The champion on `graph` (weightless, dense) with its weights dequantised from `folder`'s shards."""
    tensors = manifest["champion"]["tensors"]
    names, values = [], []
    for initializer, tensor in entry["external_weights"].items():
        spec = tensors[tensor]
        values.append(
            ort.OrtValue.ortvalue_from_numpy(dequantize(read_tensor_bytes(folder, spec), spec["format"], spec["shape"]))
        )
        names.append(initializer)
    options = ort.SessionOptions()
    options.add_external_initializers(names, values)
    return OnnxChampionRuntime(Path(graph).read_bytes(), entry, threads=threads, options=options)


def open_runtime(folder: Path, manifest: dict, compact: bool = False) -> OnnxChampionRuntime:
    """The package's CPU champion: the float32 graph filled from the shards (above), or with
    compact=True (or an older package) champion.onnx."""
    entry = manifest.get("cpu_champion")
    if entry and not compact:
        return open_dense_runtime(Path(folder), manifest, Path(folder) / entry["onnx"], entry, threads=2)
    entry = manifest["fallback"]
    return OnnxChampionRuntime(Path(folder) / entry["onnx"], entry, threads=2)
