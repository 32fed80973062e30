"""A package's champion tensors on the GPU, in the layout the kernels read.

Quantised tensors arrive as GGUF blocks (the shards' bytes, unchanged) and are rearranged on the GPU by
`shaders/repack.wgsl` into two regions of one buffer:

    [quants: 16 (Q4_1) or 32 (Q8_0) bytes per block, 16-byte aligned | pad to SCALE_ALIGN | scales: 4 bytes per block]

so a kernel reads a block's quants with one or two vec4<u32> loads and its scale with one u32 load. Bits
are copied, never converted: every value is exactly the GGUF's d*q (+ m). F32 tensors (norms) are
uploaded as they are. One staging buffer, sized for the largest tensor, carries the GGUF bytes and is
freed when loading ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .gpu import Binding, Dispatch, GPUDevice
from .kernel_abi import REPACK, wgsl_declarations

BLOCK_ELEMENTS = 32
GGUF_BLOCK_BYTES = {"q4_1": 20, "q8_0": 34}
QUANT_BYTES = {"q4_1": 16, "q8_0": 32}  # per block, in the quants region
SCALE_ALIGN = 256  # WebGPU's largest permitted min-storage-buffer-offset-alignment
WORKGROUP = 64
MAX_GROUPS_X = 65535


@dataclass(frozen=True)
class GPUTensor:
    buffer: Any
    format: str  # "f32", "q4_1" or "q8_0"
    blocks: int  # 0 for f32
    scale_offset: int  # byte offset of the scales region (0 for f32)

    @property
    def quant_bytes(self) -> int:
        return self.blocks * QUANT_BYTES[self.format]

    def quants(self) -> Binding:
        return Binding(self.buffer, 0, self.quant_bytes)

    def scales(self) -> Binding:
        return Binding(self.buffer, self.scale_offset, self.blocks * 4)

    def whole(self) -> Binding:
        return Binding(self.buffer)


def repacked_layout(format: str, blocks: int) -> tuple[int, int]:
    """(scale_offset, total bytes) of a repacked tensor of `blocks` blocks."""
    scale_offset = -(-blocks * QUANT_BYTES[format] // SCALE_ALIGN) * SCALE_ALIGN
    return scale_offset, scale_offset + blocks * 4


def tensor_blocks(entry: dict) -> int:
    elements = 1
    for size in entry["shape"]:
        elements *= size
    return elements // BLOCK_ELEMENTS


def largest_binding(tensors: dict) -> int:
    """Bytes of the largest weight binding after repacking (the quants region, or a whole f32 tensor)."""
    sizes = []
    for entry in tensors.values():
        if entry["format"] == "f32":
            sizes.append(sum(p["bytes"] for p in entry["parts"]))
        else:
            sizes.append(tensor_blocks(entry) * QUANT_BYTES[entry["format"]])
    return max(sizes)


# Projections that read the same input, run as one matmul when their weights share a format:
# fused name -> parts, in the order of their columns in the output row.
FUSED_PROJECTIONS = {"attn_qkv": ("attn_q", "attn_k", "attn_v"), "ffn_gate_up": ("ffn_gate", "ffn_up")}


def fuse_projections(tensors: dict, n_layers: int) -> dict:
    """The manifest's tensors with each layer's q/k/v and gate/up projections joined into one tensor
    (blk.i.attn_qkv.weight: shape [K, Nq + Nk + Nv], parts q's then k's then v's) where they share a format
    and K. GGUF stores a tensor's blocks row by row (output feature n, then its K/32 blocks), so the parts'
    bytes in order are exactly the joined tensor's blocks. Projections with mixed formats stay apart."""
    fused = dict(tensors)
    for layer in range(n_layers):
        for name, parts in FUSED_PROJECTIONS.items():
            entries = [tensors[f"blk.{layer}.{part}.weight"] for part in parts]
            if len({(e["format"], e["shape"][0]) for e in entries}) != 1:
                continue
            for part in parts:
                del fused[f"blk.{layer}.{part}.weight"]
            fused[f"blk.{layer}.{name}.weight"] = {
                "format": entries[0]["format"],
                "shape": [entries[0]["shape"][0], sum(e["shape"][1] for e in entries)],
                "parts": [p for e in entries for p in e["parts"]],
            }
    return fused


def repack_grid(blocks: int) -> tuple[int, int, int]:
    groups = -(-blocks // WORKGROUP)
    x = min(groups, MAX_GROUPS_X)
    return x, -(-groups // x), 1


class WeightUploader:
    """Uploads tensors one by one: f32 directly, quantised ones through the staging buffer and repack.wgsl."""

    def __init__(self, gpu: GPUDevice, tensors: dict, repack_source: str):
        self.gpu = gpu
        quantised = [sum(p["bytes"] for p in e["parts"]) for e in tensors.values() if e["format"] != "f32"]
        self.staging = gpu.create_buffer(max(quantised, default=16), "repack.staging") if quantised else None
        self.job = gpu.create_buffer(REPACK.size, "repack.job", usage="uniform")
        code = wgsl_declarations() + repack_source
        self.pipelines = {f: gpu.create_pipeline(code, f"repack_{f}", f"repack_{f}") for f in GGUF_BLOCK_BYTES}

    def upload(self, name: str, entry: dict, read_part: Callable[[dict], Any]) -> GPUTensor:
        size = sum(p["bytes"] for p in entry["parts"])
        target = self.gpu.create_buffer(size, name) if entry["format"] == "f32" else self.staging
        offset = 0
        for part in entry["parts"]:
            self.gpu.write_buffer(target, offset, read_part(part))
            offset += part["bytes"]
        if entry["format"] == "f32":
            return GPUTensor(target, "f32", 0, 0)
        return self._repack(name, entry["format"], tensor_blocks(entry))

    def _repack(self, name: str, format: str, blocks: int) -> GPUTensor:
        scale_offset, total = repacked_layout(format, blocks)
        tensor = GPUTensor(self.gpu.create_buffer(total, name), format, blocks, scale_offset)
        grid = repack_grid(blocks)
        self.gpu.write_buffer(self.job, 0, REPACK.pack(blocks=blocks, groups_x=grid[0]))
        pipeline = self.pipelines[format]
        bindings = [Binding(self.job), Binding(self.staging), tensor.quants(), tensor.scales()]
        group = self.gpu.create_bind_group(pipeline, bindings, f"repack.{name}")
        self.gpu.submit([Dispatch(pipeline, group, grid, f"repack.{name}")])  # queue order: before the next write
        return tensor

    def close(self) -> None:
        if self.staging is not None:
            self.gpu.destroy_buffer(self.staging)
            self.staging = None


def byte_range(data, start: int, end: int):
    """data[start:end] for bytes-like shards; a zero-copy subarray for JS Uint8Arrays (browser)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return memoryview(data)[start:end]
    return data.subarray(start, end)
