"""The small GPU interface the champion runtime is written against.

Two bindings implement it: `pyodide_app.native.wgpu_device` (wgpu-py; Mesa
lavapipe in tests) and, in the browser, the page's WebGPU through Pyodide's
FFI. Handles are opaque. A forward pass is a *dispatch plan* — a list of
(pipeline, bind group, workgroup counts) built once per row count T and
replayed with one `submit` per call.

Portability: the kernels need only core WebGPU with f32 math, no
subgroups, at most 8 storage and 3 uniform buffers per stage, bindings of at most 128 MiB
and workgroups of at most 256 invocations; `check_limits` refuses adapters
below that with a clear message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from .errors import GPUUnsupported

REQUIRED_LIMITS = {
    "max-storage-buffers-per-shader-stage": 8,
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroups-per-dimension": 65535,
    "max-uniform-buffers-per-shader-stage": 3,
}
BUFFER_USAGES = ("storage", "uniform", "storage+uniform")  # storage+uniform: written by kernels, read as uniform
MAX_BINDING_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Binding:
    buffer: Any
    offset: int = 0
    size: int | None = None  # None: to the end of the buffer


@dataclass(frozen=True)
class Dispatch:
    pipeline: Any
    bind_group: Any
    workgroups: tuple[int, int, int]
    label: str = ""


class GPUDevice(Protocol):
    adapter_name: str
    limits: dict[str, int]

    def create_buffer(self, size: int, label: str, usage: str = "storage") -> Any:
        """A zero-filled buffer (usage one of BUFFER_USAGES) that can be written; storage ones also copied
        and read back."""

    def destroy_buffer(self, buffer: Any) -> None:
        """Free a buffer's memory now (it must not be used again)."""

    def write_buffer(self, buffer: Any, offset: int, data: bytes) -> None: ...

    def create_pipeline(self, code: str, entry_point: str, label: str, constants: dict | None = None) -> Any:
        """constants: values of the kernel's `override` declarations (name -> number or bool)."""

    def create_bind_group(self, pipeline: Any, bindings: Sequence[Binding], label: str) -> Any:
        """bindings[i] is @binding(i) of @group(0)."""

    def submit(self, plan: Sequence[Dispatch]) -> None:
        """Encode the dispatches in order in one compute pass and submit them."""

    def read_buffer(self, buffer: Any, offset: int, size: int) -> bytes:
        """Wait for submitted work, then copy `size` bytes back."""


def check_limits(limits: dict[str, int], largest_binding: int, adapter_name: str, workgroup_bytes: int = 0) -> None:
    """Refuse an adapter whose limits are below what the kernels need."""
    needs = {**REQUIRED_LIMITS, "max-compute-workgroup-storage-size": workgroup_bytes}
    for name, needed in needs.items():
        if limits.get(name, 0) < needed:
            raise GPUUnsupported(
                f"{adapter_name}: WebGPU limit {name} is {limits.get(name)}, the champion needs {needed}"
            )
    binding_limit = limits.get("max-storage-buffer-binding-size", 0)
    if largest_binding > min(binding_limit, MAX_BINDING_BYTES):
        raise GPUUnsupported(
            f"{adapter_name}: a {largest_binding}-byte buffer binding is needed; the adapter allows {binding_limit} "
            f"(and the portable maximum is {MAX_BINDING_BYTES})"
        )
