"""Native CPU champion speed, arms interleaved in one run (this machine is shared and noisy):
  nbits   the package's champion.onnx (MatMulNBits, what the CPU path runs today)
  dense   the float32-weights, batch-invariant graph (export_onnx dense=True), built here from the package;
          its attention as batched MatMuls of one query row each (export_onnx attention "gemv", shipped)
  dense-products  the same with attention as elementwise products summed over a fixed axis ("products")
  numpy   build_tools.reference (float32 numpy forward with a KV cache)
Reports median ms for a decode step (T = 1) and a 5-row verify step, after a prompt of --prompt tokens.

    .venv/bin/python scripts/cpu_champion_speed.py [--threads 1] [--repeats 7] [--prompt 64] [--arms a,b]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_tools.distill import champion_source
from build_tools.export_onnx import export_llama
from build_tools.recipes import default_package
from build_tools.reference import ReferenceModel
from pyodide_app.native.onnx_champion import OnnxChampionRuntime


class NumpyArm:
    def __init__(self, source):
        self.model = ReferenceModel(source.config, source.tensors)
        self.cache, self.length = self.model.new_cache(4096), 0

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def run_array(self, tokens):
        out = self.model.forward(list(tokens), self.cache, self.length)
        self.length += len(tokens)
        return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--arms", default="nbits,dense,dense-products,numpy")
    args = parser.parse_args()
    folder = default_package()
    manifest = json.loads((folder / "manifest.json").read_text())
    source, _ = champion_source(folder)
    work = Path(tempfile.mkdtemp())
    build_s = {}

    def dense(attention: str) -> OnnxChampionRuntime:
        started = time.perf_counter()
        path = work / f"{attention}.onnx"
        entry = export_llama(source, source.config.n_layers, path, all_rows=True, dense=True, attention=attention)
        build_s[attention] = time.perf_counter() - started
        return OnnxChampionRuntime(path, entry, threads=args.threads)

    makers = {
        "nbits": lambda: OnnxChampionRuntime(
            folder / manifest["fallback"]["onnx"], manifest["fallback"], threads=args.threads
        ),
        "dense": lambda: dense("gemv"),
        "dense-products": lambda: dense("products"),
        "numpy": lambda: NumpyArm(source),
    }
    arms = {name: makers[name]() for name in args.arms.split(",")}
    prompt = list(range(1000, 1000 + args.prompt))
    prefill_s = {}
    for name, arm in arms.items():
        began = time.perf_counter()
        for start in range(0, len(prompt), 16):  # chunks: the products graph holds [rows, keys, 64] per head
            arm.run_array(prompt[start : start + 16])
        prefill_s[name] = time.perf_counter() - began
    times = {(name, rows): [] for name in arms for rows in (1, 5)}
    for _ in range(args.repeats):
        for rows in (1, 5):
            for name, arm in arms.items():  # interleaved: the same machine state for every arm
                arm.truncate(len(prompt))
                began = time.perf_counter()
                arm.run_array(list(range(2000, 2000 + rows)))
                times[(name, rows)].append(time.perf_counter() - began)
    result = {f"{name}_T{rows}_ms": 1000 * statistics.median(values) for (name, rows), values in times.items()}
    result.update({f"{name}_prefill_s": round(value, 2) for name, value in prefill_s.items()})
    result.update({f"{attention}_graph_build_s": round(value, 2) for attention, value in build_s.items()})
    if (work / "gemv.onnx").exists():
        result["dense_onnx_mib"] = (work / "gemv.onnx").stat().st_size / 2**20
    result["threads"] = args.threads
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
