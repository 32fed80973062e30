"""The browser binding (runs inside Pyodide in the worker), laid out like native/: the JS GPU helper
(gpu_device.py) and ONNX sessions (onnx_session.py) behind the same Python interfaces as the native
bindings, and the worker's entry points (loader.py: create_engine, kernel_report, run_chat, self_test).

onnxruntime-web runs (draft, and the CPU champion) are JS promises: their runtimes yield Waits
(waits.py) that `run_chat`, an async function, awaits, so the CPU path needs no JSPI (WebKitGTK has
none). The WebGPU champion's read-back still blocks with pyodide.ffi.run_sync, which needs JSPI:
worker.js uses WebGPU only where JSPI exists. `pyodide` is imported lazily so these modules also
import in CPython (tests check every module does).
"""

from .loader import create_engine, kernel_report, run_chat, self_test

__all__ = ["create_engine", "kernel_report", "run_chat", "self_test"]
