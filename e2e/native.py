"""Reference answers from the native engine (wgpu-py on lavapipe, or champion.onnx on onnxruntime),
built with the same request the page sends."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from pyodide_app.engine import Engine

# The WebGPU matmul family each browser runs in the conformance tests (the page's ?kernels=), so every
# family is compared against the native engine running the same family.
PAGE_KERNELS = {"chromium": "split", "firefox": "columns"}


@functools.cache
def native_engine(model: Path, backend: str, kernels: str = "columns") -> Engine:
    from pyodide_app.native.loader import load_engine

    return load_engine(model, backend=backend, kernels=kernels)


def page_request(
    prompt: str, proposer: str, k: int, temperature: float, seed: int, max_tokens: int, top_p: float = 1
) -> dict:
    """What app.js sends for a fresh chat with these settings (top-k 0, no penalty)."""
    return {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": 0,
        "repetition_penalty": 1,
        "seed": seed,
        "speculative": {"proposer": proposer, "k": 0 if proposer == "none" else k, "adaptive": False},
    }


def native_done(model: Path, backend: str = "webgpu", kernels: str = "columns", **request) -> dict:
    """The native engine's final event for this request. The engine is deterministic for a given package,
    backend, matmul family and request (seeded sampling included), so each answer is computed once per
    session: a greedy case asks for the same answer as its reference and as its same-backend check."""
    key = json.dumps([str(Path(model)), backend, kernels, page_request(**request)], sort_keys=True)
    return copy.deepcopy(_native_answer(key))


@functools.cache
def _native_answer(key: str) -> dict:
    model, backend, kernels, request = json.loads(key)
    done = list(native_engine(Path(model), backend, kernels).chat(request))[-1]
    assert done["type"] == "done", done
    return done


def native_tokens(model: Path, backend: str = "webgpu", kernels: str = "columns", **request) -> list[int]:
    return native_done(model, backend, kernels, **request)["tokens"]
