"""The one way an Engine is assembled from a package, natively (native/loader.py) and in the browser
(browser/loader.py); the bindings only supply how to read files and which device or runtimes to use."""

from __future__ import annotations

import json
from typing import Any, Callable

from .chat_template import ChatTemplate
from .cpu_champion import CpuChampion, cpu_memory_bytes
from .engine import Engine
from .gpu_champion import GPUChampion
from .proposers.neural import DraftRuntime
from .tokenizer import Tokenizer

CPU_CHUNK = 64  # prompt rows per CPU champion call


def context_limit_for(manifest: dict, wanted: int | None) -> int:
    """The request's context limit, never beyond the package's."""
    package = manifest["generation"]["context_limit"]
    return min(wanted or package, package)


def assemble_engine(
    manifest: dict,
    read_bytes: Callable[[str], Any],
    read_text: Callable[[str], str],
    shader_source: Callable[[str], str],
    *,
    gpu: Any = None,
    champion_runtime: Any = None,
    cpu_entry: str = "fallback",
    draft_runtime: DraftRuntime | None = None,
    k_max: int = 8,
    context_limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    kernels: str = "auto",
) -> Engine:
    """read_bytes(name) / read_text(name): a package file (already checked); shader_source(name): a WGSL file.
    With a GPUDevice `gpu`, the WGSL champion (kernels: its matmul family or "auto"; progress reports the
    weight upload); else the CPU champion on `champion_runtime`, which runs manifest[cpu_entry]
    ("cpu_champion": the float32 graph, "fallback": the compact champion.onnx)."""
    limit = context_limit_for(manifest, context_limit)
    if gpu is not None:
        champion = GPUChampion(
            gpu,
            manifest,
            read_bytes,
            shader_source,
            k_max=k_max,
            context_limit=limit,
            progress=progress,
            kernels=kernels,
        )
    else:
        memory = cpu_memory_bytes(manifest, cpu_entry, limit, CPU_CHUNK)
        champion = CpuChampion(champion_runtime, limit, chunk=CPU_CHUNK, memory=memory)
    tokenizer = Tokenizer.from_json(read_text(manifest["tokenizer"]))
    template = ChatTemplate.from_jinja(read_text(manifest["chat_template"]))
    draft = draft_runtime if manifest.get("draft") else None
    golden = json.loads(read_text(manifest["golden"])) if manifest.get("golden") else None
    return Engine(champion, tokenizer, template, manifest, draft, k_max, golden)
