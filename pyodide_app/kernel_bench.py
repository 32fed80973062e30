"""The champion kernel's cost by rows: verify-call time for T = 1..T_max (benchmarks, not tests).

Sweeps are interleaved (T = 1, 2, ..., T_max, 1, 2, ...) so drift hits every T alike; the first sweep
warms the pipelines up and is dropped. Used natively (scripts/bench_champion.py) and in the page
(build_tools bench), on a champion whose verify is synchronous (the WebGPU one).
"""

from __future__ import annotations

import statistics
import time

from .acceptance import PointMass
from .champion import VerifyRequest
from .processors import SamplingSettings
from .sampling import SeededDraws
from .waits import finish


def verify_sweep(champion, repeats: int, context_length: int = 64) -> dict[int, list[float]]:
    """Seconds per verify call, by T = rows, with point-mass drafts at temperature 0.7, top-p 0.9."""
    context = tuple(100 + i % 1000 for i in range(context_length))
    finish(champion.prefill(context[:-1]))
    settings = SamplingSettings(temperature=0.7, top_p=0.9)
    times: dict[int, list[float]] = {t: [] for t in range(1, champion.t_max + 1)}
    for repeat in range(repeats + 1):
        for rows in times:
            drafts = tuple(range(200, 200 + rows - 1))
            request = VerifyRequest(context, len(context) - 1, drafts, tuple(PointMass(d) for d in drafts), repeat,
                                    settings, SeededDraws(repeat))
            start = time.perf_counter()
            finish(champion.verify(request))
            if repeat:
                times[rows].append(time.perf_counter() - start)
    return times


def sweep_summary(times: dict[int, list[float]]) -> list[dict]:
    """Median seconds and the ratio to T = 1, per T."""
    base = statistics.median(times[1])
    return [{"rows": rows, "median_s": statistics.median(samples), "ratio_to_t1": statistics.median(samples) / base}
            for rows, samples in times.items()]
