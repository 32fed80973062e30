"""GPUDevice (pyodide_app/gpu.py) on web/gpu.js's GpuHelper; the native twin is native/wgpu_device.py."""

from __future__ import annotations

import json
from typing import Any

from .js import ffi


class BrowserGPU:
    def __init__(self, helper: Any):
        self.helper = helper
        self.adapter_name = str(helper.adapterName)
        self.limits = {k: int(v) for k, v in helper.limits().to_py().items()}
        self._plans: dict[int, tuple[list, int]] = {}  # id(plan list) -> (the list, JS plan id)

    def create_buffer(self, size: int, label: str, usage: str = "storage"):
        return self.helper.createBuffer(size, label, usage)

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()

    def write_buffer(self, buffer, offset: int, data) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = ffi().to_js(memoryview(data))  # a Uint8Array copy of small host data
        self.helper.writeBuffer(buffer, offset, data)  # JS arrays (weights, q rows) pass zero-copy

    def create_pipeline(self, code: str, entry_point: str, label: str, constants: dict | None = None):
        values = json.dumps({name: float(value) for name, value in (constants or {}).items()})
        return self.helper.createPipeline(code, entry_point, label, values)

    def create_bind_group(self, pipeline, bindings, label: str):
        rows = [[b.buffer, b.offset, b.size] for b in bindings]
        return self.helper.createBindGroup(pipeline, ffi().to_js(rows), label)

    def submit(self, plan) -> None:
        known = self._plans.get(id(plan))
        if known is None or known[0] is not plan:
            steps = [[d.pipeline, d.bind_group, *d.workgroups] for d in plan]
            known = (plan, self.helper.registerPlan(ffi().to_js(steps)))
            self._plans[id(plan)] = known
        self.helper.submitPlan(known[1])

    def read_buffer(self, buffer, offset: int, size: int) -> bytes:
        return ffi().run_sync(self.helper.readBuffer(buffer, offset, size)).to_bytes()
