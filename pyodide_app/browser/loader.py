"""The worker's entry points: build an Engine from the downloaded package (create_engine), report the
kernel choice, and stream one answer (run_chat). The native twin is native/loader.py."""

from __future__ import annotations

import json
from types import GeneratorType
from typing import Any

from ..engine import Engine
from ..engine_factory import assemble_engine
from ..errors import SpecChatError
from ..gpu_champion import GPUChampion
from ..orchestrator import CancelToken
from ..waits import Wait
from .gpu_device import BrowserGPU
from .js import present
from .onnx_session import BrowserChampionRuntime, BrowserDraftRuntime


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
    on_gpu = present(gpu_helper)
    draft = None
    if present(draft_runner) and manifest.get("draft"):
        draft = BrowserDraftRuntime(draft_runner, manifest["draft"])
    return assemble_engine(
        manifest,
        lambda name: files.get(name),
        lambda name: files.get(name).to_bytes().decode("utf-8"),
        lambda name: str(shaders.get(name)),
        gpu=BrowserGPU(gpu_helper) if on_gpu else None,
        champion_runtime=None if on_gpu else BrowserChampionRuntime(champion_runner, manifest[cpu_entry]),
        cpu_entry=cpu_entry,
        draft_runtime=draft,
        k_max=k_max,
        context_limit=context_limit,
        progress=progress if present(progress) else None,
        kernels=str(kernels),
    )


def kernel_report(engine: Engine) -> str:
    """JSON {"family", "timings_ms"} of the WebGPU champion's matmul kernels; "null" on the CPU path."""
    champion = engine.champion
    if not isinstance(champion, GPUChampion):
        return "null"
    return json.dumps({"family": champion.kernel_family, "timings_ms": champion.kernel_timings})


async def drive(steps: Any) -> Any:
    """Run Steps (waits.py) to their value, awaiting each Wait's promise."""
    if not isinstance(steps, GeneratorType):
        return steps
    try:
        wait = next(steps)
        while True:
            try:
                wait.resolve(await wait.awaitable)
            except Exception as error:
                wait.fail(error)
            wait = steps.send(None)
    except StopIteration as done:
        return done.value


async def self_test(engine: Engine) -> str:
    """JSON of the exactness self-test's report on the engine's champion (Engine.self_test)."""
    return json.dumps(await drive(engine.self_test()))


async def run_chat(engine: Engine, request_json: str, post: Any, state: Any) -> None:
    """Stream one answer: post(event_json) per event, awaiting the runtimes' Waits in between.
    Errors in the request become an error event."""
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
