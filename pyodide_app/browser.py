"""Browser glue (runs inside Pyodide in the worker): the JS GPU helper and draft runner behind the
same Python interfaces as the native bindings, and the chat entry point the worker calls.

onnxruntime-web runs (draft, and the CPU champion) are JS promises: their runtimes yield Waits
(waits.py) that `run_chat`, an async function, awaits, so the CPU path needs no JSPI (WebKitGTK has
none). The WebGPU champion's read-back still blocks with pyodide.ffi.run_sync, which needs JSPI:
worker.js uses WebGPU only where JSPI exists. `pyodide` is imported lazily so this module also
imports in CPython (tests check every module does).
"""

from __future__ import annotations

import json
from array import array
from typing import Any, Sequence

from .acceptance import FullRow, ReducedRow
from .chat_template import ChatTemplate
from .cpu_champion import CpuChampion, attention_bytes_per_row_key
from .engine import Engine
from .gpu_champion import GPUChampion
from .orchestrator import CancelToken
from .tokenizer import Tokenizer
from .waits import Wait, wait_for


def _present(value) -> bool:
    """False for Python None and for JS null (Pyodide's JsNull), which is not None."""
    return value is not None and type(value).__name__ != "JsNull"


def _ffi():
    from pyodide import ffi  # type: ignore[import-not-found]

    return ffi


class BrowserGPU:
    """GPUDevice on web/gpu.js's GpuHelper."""

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
            data = _ffi().to_js(memoryview(data))  # a Uint8Array copy of small host data
        self.helper.writeBuffer(buffer, offset, data)  # JS arrays (weights, q rows) pass zero-copy

    def create_pipeline(self, code: str, entry_point: str, label: str):
        return self.helper.createPipeline(code, entry_point, label)

    def create_bind_group(self, pipeline, bindings, label: str):
        rows = [[b.buffer, b.offset, b.size] for b in bindings]
        return self.helper.createBindGroup(pipeline, _ffi().to_js(rows), label)

    def submit(self, plan) -> None:
        known = self._plans.get(id(plan))
        if known is None or known[0] is not plan:
            steps = [[d.pipeline, d.bind_group, *d.workgroups] for d in plan]
            known = (plan, self.helper.registerPlan(_ffi().to_js(steps)))
            self._plans[id(plan)] = known
        self.helper.submitPlan(known[1])

    def read_buffer(self, buffer, offset: int, size: int) -> bytes:
        return _ffi().run_sync(self.helper.readBuffer(buffer, offset, size)).to_bytes()


class BrowserDraftRuntime:
    """DraftRuntime on web/draft.js's DraftRunner (onnxruntime-web)."""

    def __init__(self, runner: Any, entry: dict):
        self.runner = runner
        self.vocab_size = entry["config"]["vocab_size"]
        self.id_map = None if entry.get("id_map") is None else tuple(entry["id_map"])
        self.cached: list[int] = []

    def reset(self) -> None:
        self.runner.reset()
        self.cached = []

    def truncate(self, length: int) -> None:
        if length < len(self.cached):
            self.runner.truncate(length)
            self.cached = self.cached[:length]

    def step(self, tokens: Sequence[int], temperature: float, uniform: float):
        """Steps (waits.py) -> (token, q row)."""
        result = yield from wait_for(self.runner.step(_ffi().to_js(list(tokens)), temperature, uniform))
        self.cached.extend(tokens)
        probs = result.probs  # a JS Float32Array: it reaches the GPU without a Python copy
        row = FullRow(probs) if self.id_map is None else ReducedRow(self.id_map, probs)
        return int(result.token), row


class BrowserChampionRuntime:
    """ChampionRuntime on web/draft.js's DraftRunner loaded with the CPU champion (no WebGPU): the float32
    graph (manifest "cpu_champion", weights from the shards) or the compact champion.onnx ("fallback")."""

    def __init__(self, runner: Any, entry: dict):
        self.runner = runner
        self.vocab_size = entry["config"]["vocab_size"]
        self.attention_bytes_per_row_key = attention_bytes_per_row_key(entry)
        self.cached: list[int] = []

    def truncate(self, length: int) -> None:
        if length < len(self.cached):
            self.runner.truncate(length)
            self.cached = self.cached[:length]

    def run(self, tokens: Sequence[int]):
        """Steps (waits.py) -> one logits row per token."""
        rows = yield from wait_for(self.runner.run(_ffi().to_js(list(tokens))))
        flat = rows.to_py()  # memoryview of the f32 rows
        self.cached.extend(tokens)
        values = array("f")
        values.frombytes(flat.cast("B"))
        v = self.vocab_size
        return [values[i * v : (i + 1) * v].tolist() for i in range(len(tokens))]


class JsCancel(CancelToken):
    """Cancellation flag owned by JS (the worker sets state.cancelled when the user presses stop)."""

    def __init__(self, state: Any):
        self.state = state

    @property
    def requested(self) -> bool:
        return bool(self.state.cancelled)


def create_engine(
    manifest_json: str,
    files: Any,
    shaders: Any,
    gpu_helper: Any,
    draft_runner: Any,
    k_max: int,
    context_limit: int,
    champion_runner: Any = None,
    progress: Any = None,
    cpu_entry: str = "fallback",
    kernels: str = "auto",
) -> Engine:
    """files/shaders: JS Maps name -> Uint8Array / WGSL text (already hash-checked by the worker).
    Without WebGPU, gpu_helper is null and champion_runner runs the manifest entry `cpu_entry`
    ("cpu_champion" or "fallback") on the CPU (CpuChampion). progress(done, total) reports the weight upload.
    kernels: the WebGPU champion's matmul family, or "auto" to time each at load (GPUChampion)."""
    manifest = json.loads(manifest_json)
    if not _present(gpu_helper):
        champion = CpuChampion(BrowserChampionRuntime(champion_runner, manifest[cpu_entry]), context_limit)
    else:
        report = progress if _present(progress) else None
        champion = GPUChampion(
            BrowserGPU(gpu_helper),
            manifest,
            lambda name: files.get(name),
            lambda name: str(shaders.get(name)),
            k_max=k_max,
            context_limit=context_limit,
            progress=report,
            kernels=str(kernels),
        )
    tokenizer = Tokenizer.from_json(files.get(manifest["tokenizer"]).to_bytes().decode("utf-8"))
    template = ChatTemplate.from_jinja(files.get(manifest["chat_template"]).to_bytes().decode("utf-8"))
    draft = None
    if _present(draft_runner) and manifest.get("draft"):
        draft = BrowserDraftRuntime(draft_runner, manifest["draft"])
    return Engine(champion, tokenizer, template, manifest, draft, k_max)


def kernel_report(engine: Engine) -> str:
    """JSON {"family", "timings_ms"} of the WebGPU champion's matmul kernels; "null" on the CPU path."""
    champion = engine.champion
    if not isinstance(champion, GPUChampion):
        return "null"
    return json.dumps({"family": champion.kernel_family, "timings_ms": champion.kernel_timings})


async def run_chat(engine: Engine, request_json: str, post: Any, state: Any) -> None:
    """Stream one answer: post(event_json) per event, awaiting the runtimes' Waits in between.
    Errors in the request become an error event."""
    from .errors import SpecChatError

    try:
        events = engine.chat(json.loads(request_json), JsCancel(state))
    except SpecChatError as error:
        post(json.dumps({"type": "rejected", "code": error.code, "message": str(error)}))
        return
    for event in events:
        if isinstance(event, Wait):
            try:
                event.resolve(await event.awaitable)
            except Exception as error:
                event.fail(error)
        else:
            post(json.dumps(event))
