"""Assemble the static site: the page (web/), the vendored runtimes, the orchestrator, the shaders, a model.

    web/                 index.html, style.css, the page's modules (app.js, worker_client.js, settings.js, store.js,
                         compare.js, export.js, clipboard.js, markdown.js, charts.js), the worker's (worker.js,
                         gpu.js, onnx_session.js, row_processing.js, dequant.js), sw.js
    web/examples/        a minimal page using the embeddable API (spec-chat.js, spec-chat.d.ts)
    web/vendor/pyodide/  Pyodide core from node_modules (no CDN, no package fetches)
    web/vendor/ort/      onnxruntime-web wasm backend from node_modules
    web/vendor/pyodide_app/, shaders/   the orchestrator's Python files and the WGSL kernels
    web/model/           a model package (python -m build_tools package)
    web/vendor/site.json the file lists the worker and the service worker read
    bench/               (bench sites only, add_bench_peer) the llama.cpp peer page, @wllama/wllama, the GGUF

`--out` other than web/ copies the page there too (tests build throwaway sites).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from .source import SourceError

ROOT = Path(__file__).resolve().parent.parent
WEB = ROOT / "web"
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
# The benchmark's peer (build_tools bench): onnxruntime-web's WebGPU build. Not precached: the app never loads it.
ORT_WEBGPU_FILES = ("ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")
PAGE_FILES = (
    "index.html",
    "app.js",
    "worker_client.js",
    "settings.js",
    "store.js",
    "compare.js",
    "export.js",
    "clipboard.js",
    "self_test.js",
    "spec-chat.js",
    "spec-chat.d.ts",
    "worker.js",
    "gpu.js",
    "onnx_session.js",
    "row_processing.js",
    "dequant.js",
    "markdown.js",
    "charts.js",
    "sw.js",
    "style.css",
)

EXAMPLE_FILES = ("minimal.html", "minimal.js")  # web/examples: a page using spec-chat.js

WLLAMA = ROOT / "node_modules" / "@wllama" / "wllama" / "esm"  # the bench's llama.cpp peer (bench sites only)


def copy_files(source: Path, names, target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (source / name).is_file():
            raise SourceError(f"{source / name}: missing (run `npm ci` / scripts/setup.sh)")
        shutil.copyfile(source / name, target / name)
    return list(names)


def python_files() -> list[Path]:
    """pyodide_app without its native-only bindings."""
    return sorted(p for p in (ROOT / "pyodide_app").rglob("*.py") if "native" not in p.relative_to(ROOT).parts)


def build_site(model: Path, out: Path = WEB) -> dict:
    out = Path(out)
    model = Path(model)
    if out.resolve() != WEB.resolve():
        copy_files(WEB, PAGE_FILES, out)
        copy_files(WEB / "examples", EXAMPLE_FILES, out / "examples")  # how to embed the API (not precached)
    vendor = out / "vendor"
    shutil.rmtree(vendor, ignore_errors=True)
    files = [name for name in PAGE_FILES if name != "sw.js"]  # what the service worker caches (not itself)
    files += [
        f"vendor/pyodide/{n}" for n in copy_files(ROOT / "node_modules" / "pyodide", PYODIDE_FILES, vendor / "pyodide")
    ]
    files += [
        f"vendor/ort/{n}"
        for n in copy_files(ROOT / "node_modules" / "onnxruntime-web" / "dist", ORT_FILES, vendor / "ort")
    ]
    copy_files(ROOT / "node_modules" / "onnxruntime-web" / "dist", ORT_WEBGPU_FILES, vendor / "ort-webgpu")
    python = []
    for path in python_files():
        relative = path.relative_to(ROOT).as_posix()
        (vendor / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, vendor / relative)
        python.append(relative)
    shaders = sorted(p.stem for p in (ROOT / "shaders").glob("*.wgsl"))
    copy_files(ROOT / "shaders", [f"{s}.wgsl" for s in shaders], vendor / "shaders")
    files += [f"vendor/{p}" for p in python] + [f"vendor/shaders/{s}.wgsl" for s in shaders]
    model_out = out / "model"
    if model.resolve() != model_out.resolve():
        shutil.rmtree(model_out, ignore_errors=True)
        shutil.copytree(model, model_out)
    manifest = json.loads((model_out / "manifest.json").read_text())
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0" + (out / name).read_bytes())
    site = {
        "version": digest.hexdigest()[:16] + "-" + manifest["identity"]["champion_weights"][:8],
        "python": python,
        "shaders": shaders,
        "app_files": files,
        "model": "model/",
        "model_files": ["manifest.json"] + sorted(manifest["files"]),
    }
    (vendor / "site.json").write_text(json.dumps(site, indent=1))
    return site


def add_bench_peer(out: Path, gguf: Path | None) -> None:
    """The bench's llama.cpp peer next to a built site (build_tools bench only; the app never has it):
    bench/wllama.html, @wllama/wllama from node_modules, and the GGUF the package was built from."""
    bench = Path(out) / "bench"
    copy_files(ROOT / "build_tools" / "bench_peers", ["wllama.html"], bench)
    copy_files(WLLAMA, ["index.js"], bench / "wllama")
    copy_files(WLLAMA / "wasm", ["wllama.wasm"], bench / "wllama" / "wasm")
    if gguf is not None:
        (bench / "model.gguf").symlink_to(Path(gguf).resolve())
