"""The weight repack and every matmul kernel family, driven directly on lavapipe (wgpu-py).

Shapes are chosen to reach the edges: N = 13 columns (not a multiple of the 8 columns an invocation or
workgroup owns), K = 96 (3 blocks: fewer than the split family's 8 K slices), odd block indices (Q8_0
blocks straddle words). Each family is checked against a float64 product of the dequantised weights,
for batch invariance (row t bitwise equal for every T) and in its accumulate (`_add`) form.
"""

from __future__ import annotations

import numpy as np
import pytest

from build_tools.reference import dequantize
from build_tools.source import quantize
from pyodide_app.gpu import Binding, Dispatch
from pyodide_app.gpu_champion import (
    COLUMNS_PER_INVOCATION,
    COLUMNS_PER_SPLIT_GROUP,
    COLUMNS_WORKGROUP,
    KERNEL_FAMILIES,
    matmul_source,
)
from pyodide_app.gpu_weights import GGUF_BLOCK_BYTES, QUANT_BYTES, WeightUploader
from pyodide_app.kernel_abi import PARAMS, SHAPE, wgsl_declarations

from .conftest import ROOT

T_MAX = 9
N, K = 13, 96


def shader(name: str) -> str:
    return (ROOT / "shaders" / f"{name}.wgsl").read_text()


@pytest.fixture(scope="module")
def gpu():
    wgpu_device = pytest.importorskip("pyodide_app.native.wgpu_device")
    return wgpu_device.WgpuDevice()


def upload(gpu, tensor):
    entry = {
        "format": tensor.format,
        "shape": list(tensor.shape),
        "parts": [{"shard": "s", "offset": 0, "bytes": np.asarray(tensor.data).nbytes}],
    }
    uploader = WeightUploader(gpu, {"w": entry}, shader("repack"))
    try:
        return uploader.upload("w", entry, lambda part: np.asarray(tensor.data).tobytes())
    finally:
        uploader.close()


def weights(fmt: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((N, K)).astype(np.float32) * np.linspace(0.2, 3.0, N, dtype=np.float32)[:, None]
    return quantize(values, fmt)


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0"])
def test_repack_copies_every_block_exactly(gpu, fmt):
    tensor = weights(fmt)
    on_gpu = upload(gpu, tensor)
    raw = np.frombuffer(np.asarray(tensor.data).tobytes(), np.uint8).reshape(-1, GGUF_BLOCK_BYTES[fmt])
    scale_bytes = 4 if fmt == "q4_1" else 2
    want_scales = np.zeros((len(raw), 4), np.uint8)
    want_scales[:, :scale_bytes] = raw[:, :scale_bytes]
    quants = np.frombuffer(gpu.read_buffer(on_gpu.buffer, 0, on_gpu.quant_bytes), np.uint8).reshape(len(raw), -1)
    scales = np.frombuffer(gpu.read_buffer(on_gpu.buffer, on_gpu.scale_offset, len(raw) * 4), np.uint8).reshape(
        len(raw), 4
    )
    assert quants.shape[1] == QUANT_BYTES[fmt]
    assert np.array_equal(quants, raw[:, scale_bytes:]), "quant bytes moved or changed"
    assert np.array_equal(scales, want_scales), "scale words differ from the blocks' f16 fields"


class MatmulRig:
    """One family's four entry points on one weight tensor, with buffers for up to T_MAX rows."""

    def __init__(self, gpu, family: str, fmt: str, uniform_activations: bool, workgroup: int):
        self.gpu, self.family, self.fmt = gpu, family, fmt
        self.tensor = weights(fmt)
        self.weight = upload(gpu, self.tensor)
        self.x_vec4s = T_MAX * K // 4
        source = matmul_source(shader(f"matmul_{family}"), self.x_vec4s if uniform_activations else None, workgroup)
        code = f"const TMAX: u32 = {T_MAX}u;\n" + wgsl_declarations() + shader("common") + source
        self.params = gpu.create_buffer(16, "params", usage="uniform")
        shape = gpu.create_buffer(16, "shape", usage="uniform")
        gpu.write_buffer(shape, 0, SHAPE.pack(k=K, n=N, y_stride=N, y_offset=0))
        self.x = gpu.create_buffer(T_MAX * K * 4, "x", usage="storage+uniform")
        self.y = gpu.create_buffer(T_MAX * N * 4, "y")
        x_binding = Binding(self.x, 0, self.x_vec4s * 16) if uniform_activations else Binding(self.x)
        bindings = [
            Binding(self.params),
            Binding(shape),
            x_binding,
            self.weight.quants(),
            self.weight.scales(),
            Binding(self.y),
        ]
        self.steps = {}
        for add in (False, True):
            label = f"matmul_{fmt}{'_add' if add else ''}"
            pipeline = gpu.create_pipeline(code, f"matmul_{fmt}", label, {"ACCUMULATE": add})
            self.steps[add] = (pipeline, gpu.create_bind_group(pipeline, bindings, label))
        per_group = COLUMNS_PER_INVOCATION * workgroup if family == "columns" else COLUMNS_PER_SPLIT_GROUP
        self.workgroups = (-(-N // per_group), 1, 1)

    def run(self, x: np.ndarray, y0: np.ndarray | None = None) -> np.ndarray:
        """y = x @ W^T, or y0 + x @ W^T when y0 is given; x: f32 [rows, K]."""
        rows = len(x)
        self.gpu.write_buffer(self.params, 0, PARAMS.pack(rows=rows, position=0))
        self.gpu.write_buffer(self.x, 0, np.ascontiguousarray(x, np.float32).tobytes())
        if y0 is not None:
            self.gpu.write_buffer(self.y, 0, np.ascontiguousarray(y0, np.float32).tobytes())
        pipeline, group = self.steps[y0 is not None]
        self.gpu.submit([Dispatch(pipeline, group, self.workgroups)])
        return np.frombuffer(self.gpu.read_buffer(self.y, 0, rows * N * 4), np.float32).reshape(rows, N)


# The columns family with the champion's workgroups (COLUMNS_WORKGROUP: one workgroup here) and with
# 1-invocation workgroups (one per 8 columns: N = 13 needs two, so a kernel that indexes columns by the
# local id instead of the global one fails). The split family has its own fixed workgroup.
CASES = [
    (family, fmt, uniform, workgroup)
    for family in KERNEL_FAMILIES
    for fmt in ("q4_1", "q8_0")
    for uniform in ((True, False) if family == "columns" else (False,))
    for workgroup in ((COLUMNS_WORKGROUP, 1) if family == "columns" else (COLUMNS_WORKGROUP,))
]


@pytest.mark.parametrize("family,fmt,uniform,workgroup", CASES)
def test_matmul_family_matches_float64_and_is_batch_invariant(gpu, family, fmt, uniform, workgroup):
    rig = MatmulRig(gpu, family, fmt, uniform, workgroup)
    w = dequantize(rig.tensor).astype(np.float64)  # [N, K]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((T_MAX, K)).astype(np.float32)
    y0 = rng.standard_normal((T_MAX, N)).astype(np.float32)
    scale = np.abs(x.astype(np.float64)) @ np.abs(w).T  # bound on the rounding error's size
    full = rig.run(x)
    assert np.all(np.abs(full - x.astype(np.float64) @ w.T) <= 1e-5 * scale + 1e-6), "product differs from float64"
    full_add = rig.run(x, y0)
    assert np.all(np.abs(full_add - (y0 + x.astype(np.float64) @ w.T)) <= 1e-5 * scale + 1e-5), "_add form wrong"
    for rows in range(1, T_MAX):
        assert np.array_equal(rig.run(x[:rows]).view(np.uint32), full[:rows].view(np.uint32)), (
            f"rows change at T={rows}"
        )
        assert np.array_equal(rig.run(x[:rows], y0[:rows]).view(np.uint32), full_add[:rows].view(np.uint32))
    for t in range(T_MAX):  # a row alone, in the first slot
        assert np.array_equal(rig.run(x[t : t + 1]).view(np.uint32), full[t : t + 1].view(np.uint32)), f"row {t} alone"
