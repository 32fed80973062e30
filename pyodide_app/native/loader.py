"""Build an Engine natively from a package folder: wgpu-py champion (or the CPU champion), onnxruntime draft."""

from __future__ import annotations

from pathlib import Path

from ..engine import Engine
from ..engine_factory import assemble_engine
from ..package_check import check_package, load_manifest
from .onnx_draft import OnnxDraftRuntime

SHADERS = Path(__file__).resolve().parent.parent.parent / "shaders"


def load_engine(
    folder: Path,
    k_max: int = 8,
    context_limit: int | None = None,
    gpu=None,
    check: bool = True,
    backend: str = "webgpu",
    kernels: str = "auto",
) -> Engine:
    """backend "webgpu" (wgpu-py), "cpu" (the float32 champion_cpu.onnx with weights from the shards, or
    champion.onnx when the package has no such graph; acceptance in Python) or "cpu-compact" (champion.onnx,
    MatMulNBits: the browser's low-memory fallback). kernels: the WebGPU matmul family (GPUChampion)."""
    folder = Path(folder)
    manifest = check_package(folder) if check else load_manifest(folder)  # check: refuse a damaged package
    champion_runtime, cpu_entry = None, "fallback"
    if backend in ("cpu", "cpu-compact"):
        from .dense_champion import open_runtime

        compact = backend == "cpu-compact" or not manifest.get("cpu_champion")
        champion_runtime, cpu_entry = open_runtime(folder, manifest, compact), "fallback" if compact else "cpu_champion"
    elif gpu is None:
        from .wgpu_device import WgpuDevice

        gpu = WgpuDevice()
    draft = OnnxDraftRuntime(folder / manifest["draft"]["onnx"], manifest["draft"]) if manifest.get("draft") else None
    return assemble_engine(
        manifest,
        lambda name: (folder / name).read_bytes(),
        lambda name: (folder / name).read_text(),
        lambda name: (SHADERS / f"{name}.wgsl").read_text(),
        gpu=gpu if champion_runtime is None else None,
        champion_runtime=champion_runtime,
        cpu_entry=cpu_entry,
        draft_runtime=draft,
        k_max=k_max,
        context_limit=context_limit,
        kernels=kernels,
    )
