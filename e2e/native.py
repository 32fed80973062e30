"""Reference answers from the native engine (wgpu-py on lavapipe, or champion.onnx on onnxruntime),
built with the same request the page sends."""

from __future__ import annotations

import functools
from pathlib import Path

from pyodide_app.engine import Engine


@functools.cache
def native_engine(model: Path, backend: str) -> Engine:
    from pyodide_app.native.loader import load_engine

    return load_engine(model, backend=backend)


def page_request(prompt: str, proposer: str, k: int, temperature: float, seed: int, max_tokens: int) -> dict:
    """What app.js sends for a fresh chat with these settings (top-p 1, top-k 0, no penalty)."""
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": temperature,
            "top_p": 1, "top_k": 0, "repetition_penalty": 1, "seed": seed,
            "speculative": {"proposer": proposer, "k": 0 if proposer == "none" else k, "adaptive": False}}


def native_done(model: Path, backend: str = "webgpu", **request) -> dict:
    done = list(native_engine(Path(model), backend).chat(page_request(**request)))[-1]
    assert done["type"] == "done", done
    return done


def native_tokens(model: Path, backend: str = "webgpu", **request) -> list[int]:
    return native_done(model, backend, **request)["tokens"]
