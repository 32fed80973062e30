"""How fast could the WGSL prefill get on this adapter? A bound, measured (a benchmark, not a test).

Arms, interleaved in one run on a --prompt-token prompt from an empty cache (time to first token):

  webgpu      the shipped columns kernels
  no-loads    the same kernels with the matmuls' activation loads replaced by register arithmetic: WRONG
              values, so only its time means anything. On lavapipe those loads are most of the prefill
              matmul's cost, so this arm bounds what any reorganisation of the loads could buy while each
              output keeps the expression that batch invariance fixes (the same products and sums).
  onnx        champion.onnx on onnxruntime CPU (issue 15's yardstick: TTFT <= 2x this)

Then the 64-row prefill forward by kernel kind (ms per row) for the two WGSL arms.

    .venv/bin/python scripts/prefill_bound.py [--model DIR] [--prompt 180] [--repeats 3]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from champion_yardsticks import OnnxArm, WebGPUArm, parse_run, shipped_shader  # noqa: E402

from pyodide_app.kernel_bench import profile_by_kind  # noqa: E402
from pyodide_app.native.dense_champion import open_runtime  # noqa: E402

ACTIVATION_LOADS = "return Block32(x[v], x[v + 1u], x[v + 2u], x[v + 3u], x[v + 4u], x[v + 5u], x[v + 6u], x[v + 7u]);"
IN_REGISTERS = (
    "let c = vec4<f32>(f32(v)); return Block32(c, c + 1.0, c + 2.0, c + 3.0, c + 4.0, c + 5.0, c + 6.0, c + 7.0);"
)
KEEP_BINDING = "    if (id.x == 0xffffffffu) { y[0] = x[0].x; }\n"  # x stays in the layout, never loaded


def without_activation_loads(name: str) -> str:
    source = shipped_shader(name)
    if name != "matmul_columns":
        return source
    if ACTIVATION_LOADS not in source:
        raise SystemExit("matmul_columns.wgsl no longer loads activations as this script expects: update it")
    source = source.replace(ACTIVATION_LOADS, IN_REGISTERS)
    for entry in ("columns_q4_1", "columns_q8_0"):
        source = source.replace(f"    {entry}(id.x * COLUMNS);", KEEP_BINDING + f"    {entry}(id.x * COLUMNS);")
    return source


def main() -> None:
    run = parse_run(__doc__, repeats=3)
    folder, manifest, capacity, prompt = run.folder, run.manifest, run.capacity, run.prompt
    arms = {
        "webgpu": WebGPUArm(folder, manifest, capacity, kernels="columns"),
        "no-loads (wrong values)": WebGPUArm(folder, manifest, capacity, without_activation_loads, "columns"),
        "onnx": OnnxArm(open_runtime(folder, manifest, compact=True)),
    }
    ttft = {name: [] for name in arms}
    for repeat in range(run.repeats + 1):  # the first round warms up and is dropped
        for name, arm in arms.items():
            began = time.perf_counter()
            arm.first_token(prompt)
            if repeat:
                ttft[name].append(time.perf_counter() - began)
    onnx = statistics.median(ttft["onnx"])
    print(f"prompt {len(prompt)} tokens, {run.repeats} interleaved repeats")
    print("| arm | time to first token (s) | x champion.onnx |\n|---|---|---|")
    for name, times in ttft.items():
        print(f"| {name} | {statistics.median(times):.2f} | {statistics.median(times) / onnx:.2f} |")
    wgsl = [name for name in arms if name != "onnx"]
    rows = arms["webgpu"].champion.prefill_rows
    profiles = {name: profile_by_kind(arms[name].champion, rows, position=0, prefill=True) for name in wgsl}
    print(f"\n{rows}-row prefill forward, ms per row\n| kind | " + " | ".join(wgsl) + " |\n|---|---|---|")
    for kind in profiles["webgpu"]:
        print(f"| {kind} | " + " | ".join(f"{profiles[name][kind]['ms'] / rows:.2f}" for name in wgsl) + " |")


if __name__ == "__main__":
    main()
