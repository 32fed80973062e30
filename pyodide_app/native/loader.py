"""Build an Engine natively from a package folder: wgpu-py champion, onnxruntime draft."""

from __future__ import annotations

from pathlib import Path

from ..chat_template import ChatTemplate
from ..engine import Engine
from ..gpu_champion import GPUChampion
from ..package_check import check_package, load_manifest
from ..tokenizer import Tokenizer
from .onnx_draft import OnnxDraftRuntime
from .wgpu_device import WgpuDevice

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
    limit = min(context_limit or manifest["generation"]["context_limit"], manifest["generation"]["context_limit"])
    if backend in ("cpu", "cpu-compact"):
        from ..cpu_champion import CpuChampion
        from .dense_champion import open_runtime

        champion = CpuChampion(open_runtime(folder, manifest, compact=backend == "cpu-compact"), limit)
    else:
        champion = GPUChampion(
            gpu or WgpuDevice(),
            manifest,
            lambda name: (folder / name).read_bytes(),
            lambda name: (SHADERS / f"{name}.wgsl").read_text(),
            k_max=k_max,
            context_limit=limit,
            kernels=kernels,
        )
    tokenizer = Tokenizer.from_json((folder / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((folder / manifest["chat_template"]).read_text())
    draft = None
    if manifest.get("draft"):
        draft = OnnxDraftRuntime(folder / manifest["draft"]["onnx"], manifest["draft"])
    return Engine(champion, tokenizer, template, manifest, draft, k_max)
