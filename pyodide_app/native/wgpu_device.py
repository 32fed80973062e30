"""GPUDevice on wgpu-py (Vulkan; Mesa lavapipe on machines without a GPU)."""

from __future__ import annotations

import os
from typing import Sequence

import wgpu

from ..gpu import MAX_BINDING_BYTES, Binding, Dispatch

STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
UNIFORM = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
USAGES = {"storage": STORAGE, "uniform": UNIFORM, "storage+uniform": STORAGE | UNIFORM}


class WgpuDevice:
    def __init__(self):
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("no WebGPU adapter (install mesa-vulkan-drivers for lavapipe)")
        info = adapter.info
        self.adapter_name = f"{info.get('device', '?')} ({info.get('backend_type', '?')})"
        binding = min(adapter.limits["max-storage-buffer-binding-size"], MAX_BINDING_BYTES)
        self.device = adapter.request_device_sync(
            required_limits={"max-storage-buffer-binding-size": binding, "max-buffer-size": max(binding, 256 << 20)}
        )
        self.limits = dict(self.device.limits)  # what this device grants, which kernels must fit

    def create_buffer(self, size: int, label: str, usage: str = "storage"):
        return self.device.create_buffer(size=max(16, (size + 3) // 4 * 4), usage=USAGES[usage], label=label)

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()

    def write_buffer(self, buffer, offset: int, data) -> None:
        data = memoryview(data).cast("B")
        if len(data) % 4:  # WebGPU writes whole 4-byte words
            data = bytes(data) + b"\0" * (-len(data) % 4)
        self.device.queue.write_buffer(buffer, offset, data)

    def create_pipeline(self, code: str, entry_point: str, label: str, constants: dict | None = None):
        module = self.device.create_shader_module(code=code, label=label)
        stage = {"module": module, "entry_point": entry_point}
        if constants:
            stage["constants"] = {name: float(value) for name, value in constants.items()}  # WebGPU: doubles
        return self.device.create_compute_pipeline(layout="auto", compute=stage, label=label)

    def create_bind_group(self, pipeline, bindings: Sequence[Binding], label: str):
        entries = []
        for index, binding in enumerate(bindings):
            resource = {"buffer": binding.buffer, "offset": binding.offset}
            resource["size"] = binding.size if binding.size is not None else binding.buffer.size - binding.offset
            entries.append({"binding": index, "resource": resource})
        return self.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries, label=label)

    def submit(self, plan: Sequence[Dispatch]) -> None:
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        for step in plan:
            compute.set_pipeline(step.pipeline)
            compute.set_bind_group(0, step.bind_group)
            compute.dispatch_workgroups(*step.workgroups)
        compute.end()
        self.device.queue.submit([encoder.finish()])

    def read_buffer(self, buffer, offset: int, size: int) -> bytes:
        return bytes(self.device.queue.read_buffer(buffer, offset, size))
