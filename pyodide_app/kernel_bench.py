"""The champion kernel's cost by rows: verify-call time for T = 1..T_max, and a profile by kernel kind
(benchmarks, not tests).

Sweeps are interleaved (T = 1, 2, ..., T_max, 1, 2, ...) so drift hits every T alike; the first sweep
warms the pipelines up and is dropped. Used natively (scripts/bench_champion.py) and in the page
(build_tools bench), on a champion whose verify is synchronous (the WebGPU one).
"""

from __future__ import annotations

import statistics
import time

from .costs import verify_ms_by_rows, verify_request
from .kernel_abi import PARAMS
from .processors import SamplingSettings
from .waits import finish


def verify_sweep(champion, repeats: int, context_length: int = 64) -> dict[int, list[float]]:
    """Seconds per verify call, by T = rows, with point-mass drafts at temperature 0.7, top-p 0.9."""
    context = tuple(100 + i % 1000 for i in range(context_length))
    finish(champion.prefill(context[:-1]))
    settings = SamplingSettings(temperature=0.7, top_p=0.9)
    times: dict[int, list[float]] = {t: [] for t in range(1, champion.t_max + 1)}
    for repeat in range(repeats + 1):
        for rows in times:
            request = verify_request(context, tuple(range(200, 200 + rows - 1)), repeat, settings)
            start = time.perf_counter()
            finish(champion.verify(request))
            if repeat:
                times[rows].append(time.perf_counter() - start)
    return times


def sweep_summary(times: dict[int, list[float]]) -> list[dict]:
    """Median seconds and the ratio to T = 1, per T."""
    base = statistics.median(times[1])
    return [
        {"rows": rows, "median_s": statistics.median(samples), "ratio_to_t1": statistics.median(samples) / base}
        for rows, samples in times.items()
    ]


KERNEL_KINDS = {  # dispatch label suffix -> kind, for profiles
    "attn_qkv": "matmul",
    "ffn_gate_up": "matmul",
    "attn_q": "matmul",
    "attn_k": "matmul",
    "attn_v": "matmul",
    "attn_output": "matmul",
    "ffn_gate": "matmul",
    "ffn_up": "matmul",
    "ffn_down": "matmul",
    "head": "lm head",
    "attn_norm": "rmsnorm",
    "ffn_norm": "rmsnorm",
    "output_norm": "rmsnorm",
    "rope_kv": "rope + kv store",
    "attention": "attention",
    "swiglu": "swiglu",
    "embed": "embed",
    "verify": "verify",
}


def kernel_kind(label: str) -> str:
    return KERNEL_KINDS.get(label.rsplit(".", 1)[-1], "other")


def profile_by_kind(
    champion, rows: int, repeats: int = 3, position: int = 64, prefill: bool = False
) -> dict[str, dict]:
    """Milliseconds per forward spent in each kernel kind at T = rows: each kind's dispatches are submitted
    alone (in plan order) and timed to completion, best of `repeats`; "forward + verify" (prefill: "whole
    forward") is the whole plan. prefill: the prefill plan (up to prefill_rows rows, no head or verify).
    The kinds run on whatever the buffers hold, so the KV cache is forgotten afterwards."""
    champion.gpu.write_buffer(champion.params, 0, PARAMS.pack(rows=rows, position=position))
    plan = champion.prefill_plan(rows) if prefill else champion.verify_plan(rows)
    by_kind: dict[str, list] = {}
    for step in plan:
        by_kind.setdefault(kernel_kind(step.label), []).append(step)
    by_kind["whole forward" if prefill else "forward + verify"] = list(plan)
    profile = {}
    for kind, steps in by_kind.items():
        best = float("inf")
        for _ in range(repeats + 1):  # the first run warms up
            began = time.perf_counter()
            champion.gpu.submit(steps)
            champion.gpu.read_buffer(champion.result, 0, 4)
            best = min(best, time.perf_counter() - began)
        profile[kind] = {"ms": best * 1000, "dispatches": len(steps)}
    champion.forget()
    return profile


def decode_step_ms(champion, repeats: int = 3) -> float:
    """Best-of-`repeats` milliseconds of one greedy champion-alone step (a 1-row verify call after a
    64-token context): what a token costs on this champion. The KV cache is forgotten."""
    return finish(verify_ms_by_rows(champion, (1,), repeats))[1]
