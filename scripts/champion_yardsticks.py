"""The native champions against fixed yardsticks, interleaved in one run (a benchmark, not a test):

  webgpu     GPUChampion (WGSL on wgpu-py; lavapipe here), matmul family timed at load
  cpu        the float32 CPU champion (champion_cpu.onnx, weights from the shards; `--backend cpu`)
  onnx       champion.onnx on onnxruntime CPU (MatMulNBits; the compact CPU path)
  numpy      build_tools.reference: a float32 numpy forward with a KV cache

Per arm: time to first token on a --prompt-token prompt (prefill + the first token's logits, from an
empty cache) and the median decode step (one new token after the prompt). Ratios are to numpy.

    .venv/bin/python scripts/champion_yardsticks.py [--model DIR] [--prompt 180] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.recipes import default_package  # noqa: E402
from build_tools.reference import ReferenceModel, read_champion  # noqa: E402
from pyodide_app.champion import VerifyRequest  # noqa: E402
from pyodide_app.gpu_champion import GPUChampion  # noqa: E402
from pyodide_app.native.dense_champion import open_runtime  # noqa: E402
from pyodide_app.native.onnx_champion import OnnxChampionRuntime  # noqa: E402
from pyodide_app.native.wgpu_device import WgpuDevice  # noqa: E402
from pyodide_app.processors import SamplingSettings  # noqa: E402
from pyodide_app.sampling import SeededDraws  # noqa: E402


def shipped_shader(name: str) -> str:
    return (ROOT / "shaders" / f"{name}.wgsl").read_text()


class WebGPUArm:
    def __init__(self, folder: Path, manifest: dict, capacity: int, shader_source=shipped_shader, kernels="auto"):
        self.champion = GPUChampion(
            WgpuDevice(),
            manifest,
            lambda n: (folder / n).read_bytes(),
            shader_source,
            context_limit=capacity,
            kernels=kernels,
        )

    def first_token(self, prompt: list[int]) -> None:
        self.champion.forget()
        self._step(prompt)

    def decode(self, context: list[int]) -> None:
        self._step(context)

    def _step(self, context: list[int]) -> None:
        """A greedy 1-row verify at the frontier (prefilling what the cache lacks): a token, read back."""
        request = VerifyRequest(
            tuple(context), len(context) - 1, (), (), 0, SamplingSettings(temperature=0), SeededDraws(0)
        )
        self.champion.verify(request)


class OnnxArm:
    def __init__(self, runtime: OnnxChampionRuntime):
        self.runtime = runtime

    def first_token(self, prompt: list[int]) -> None:
        self.runtime.reset()
        self.runtime.run_array(prompt).argmax(axis=-1)

    def decode(self, context: list[int]) -> None:
        self.runtime.truncate(len(context) - 1)
        self.runtime.run_array(context[-1:]).argmax(axis=-1)


class NumpyArm:
    def __init__(self, folder: Path, capacity: int):
        config, tensors = read_champion(folder)
        self.model = ReferenceModel(config, tensors)
        self.cache = self.model.new_cache(capacity)

    def first_token(self, prompt: list[int]) -> None:
        self.model.forward(prompt, self.cache, 0).argmax(axis=-1)

    def decode(self, context: list[int]) -> None:
        self.model.forward(context[-1:], self.cache, len(context) - 1).argmax(axis=-1)


class Run(NamedTuple):
    """A yardstick run's inputs: the package, its manifest, KV capacity (the prompt + 64), the prompt's ids."""

    repeats: int
    folder: Path
    manifest: dict
    capacity: int
    prompt: list[int]


def parse_run(description: str, repeats: int) -> Run:
    """--model DIR (default: the default package), --prompt N tokens (default 180), --repeats R."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--prompt", type=int, default=180)
    parser.add_argument("--repeats", type=int, default=repeats)
    args = parser.parse_args()
    folder = args.model or default_package()
    manifest = json.loads((folder / "manifest.json").read_text())
    prompt = [100 + (37 * i) % 5000 for i in range(args.prompt)]
    return Run(args.repeats, folder, manifest, args.prompt + 64, prompt)


def main() -> None:
    run = parse_run(__doc__, repeats=5)
    folder, manifest, capacity, prompt = run.folder, run.manifest, run.capacity, run.prompt
    arms = {
        "webgpu": WebGPUArm(folder, manifest, capacity),
        "cpu": OnnxArm(open_runtime(folder, manifest)),
        "onnx": OnnxArm(open_runtime(folder, manifest, compact=True)),
        "numpy": NumpyArm(folder, capacity),
    }
    ttft = {name: [] for name in arms}
    decode = {name: [] for name in arms}
    for repeat in range(run.repeats + 1):  # the first round warms every arm up and is dropped
        for name, arm in arms.items():  # interleaved: every arm sees the same machine state
            began = time.perf_counter()
            arm.first_token(prompt)
            elapsed = time.perf_counter() - began
            steps = []
            for i in range(3):
                context = prompt + [200 + i]
                began = time.perf_counter()
                arm.decode(context)
                steps.append(time.perf_counter() - began)
            if repeat:
                ttft[name].append(elapsed)
                decode[name].extend(steps)
    gpu = arms["webgpu"].champion
    print(
        f"prompt {len(prompt)} tokens; {run.repeats} interleaved repeats; WGSL kernels: {gpu.kernel_family}, "
        f"prefill {gpu.prefill_rows} rows per forward; adapter {gpu.gpu.adapter_name}"
    )
    numpy_decode = statistics.median(decode["numpy"])
    numpy_ttft = statistics.median(ttft["numpy"])
    print("| arm | time to first token (s) | × numpy | decode step (ms) | decode tok/s | × numpy |")
    print("|---|---|---|---|---|---|")
    for name in arms:
        t, d = statistics.median(ttft[name]), statistics.median(decode[name])
        print(f"| {name} | {t:.2f} | {numpy_ttft / t:.2f} | {1000 * d:.1f} | {1 / d:.1f} | {numpy_decode / d:.2f} |")


if __name__ == "__main__":
    main()
