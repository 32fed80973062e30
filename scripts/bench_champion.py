"""Benchmark of the WGSL champion (not a test): verify-call time for T = 1..T_max as a ratio to T = 1,
bytes read back per round, a profile by kernel kind at T = 1 and 5, and GPU memory by category.

    .venv/bin/python scripts/bench_champion.py [--model DIR] [--repeats N] [--context N] [--kernels F]
                                               [--columns-workgroup N]

Rounds are interleaved (T = 1, 2, ..., 9, 1, 2, ...) so machine drift hits every T alike; the
table reports medians. Without --model the default package is built into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyodide_app.gpu_champion import COLUMNS_WORKGROUP, GPUChampion  # noqa: E402
from pyodide_app.kernel_abi import RESULT_BYTES  # noqa: E402
from pyodide_app.kernel_bench import profile_by_kind, sweep_summary, verify_sweep  # noqa: E402
from pyodide_app.native.wgpu_device import WgpuDevice  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--kernels", default="auto", help="matmul family: auto (timed at load), columns or split")
    parser.add_argument("--columns-workgroup", type=int, default=COLUMNS_WORKGROUP, help="invocations per workgroup")
    args = parser.parse_args()
    model = args.model
    if model is None:
        model = Path(tempfile.mkdtemp()) / "pkg"
        subprocess.run(
            [sys.executable, "-m", "build_tools", "package", "--out", str(model), "--no-golden"], check=True, cwd=ROOT
        )
    manifest = json.loads((model / "manifest.json").read_text())
    gpu = WgpuDevice()
    started = time.perf_counter()
    champion = GPUChampion(
        gpu,
        manifest,
        lambda n: (model / n).read_bytes(),
        lambda n: (ROOT / "shaders" / f"{n}.wgsl").read_text(),
        k_max=8,
        context_limit=args.context,
        kernels=args.kernels,
        columns_workgroup=args.columns_workgroup,
    )
    load_s = time.perf_counter() - started
    summary = sweep_summary(verify_sweep(champion, args.repeats))
    profiles = {rows: profile_by_kind(champion, rows, args.repeats) for rows in (1, 5)}
    weights = champion.weight_bytes
    print(
        f"adapter: {gpu.adapter_name}; load {load_s:.1f} s; context {args.context}; {args.repeats} interleaved repeats"
    )
    print(
        f"matmul kernels: {champion.kernel_family}; load-time calibration (ms): {json.dumps(champion.kernel_timings)}"
    )
    print("| T | median verify (s) | ratio to T=1 | per row |")
    print("|---|---|---|---|")
    for row in summary:
        print(
            f"| {row['rows']} | {row['median_s']:.3f} | {row['ratio_to_t1']:.2f} | "
            f"{row['ratio_to_t1'] / row['rows']:.2f} |"
        )
    print(f"bytes read back per round: {RESULT_BYTES}")
    print("\nProfile by kernel kind (each kind's dispatches submitted alone, best of the repeats, ms per forward):")
    print("| kind | dispatches | T=1 (ms) | T=5 (ms) | T=5 / T=1 |")
    print("|---|---|---|---|---|")
    for kind, one in profiles[1].items():
        five = profiles[5][kind]
        print(f"| {kind} | {one['dispatches']} | {one['ms']:.1f} | {five['ms']:.1f} | {five['ms'] / one['ms']:.2f} |")
    print(
        f"GPU memory: weights {weights / 2**20:.1f} MiB, KV {champion.kv_bytes / 2**20:.1f} MiB, "
        f"scratch {champion.scratch_bytes / 2**20:.2f} MiB (activations, logits and verify buffers for T_max = "
        f"{champion.t_max})"
    )


if __name__ == "__main__":
    main()
