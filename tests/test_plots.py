"""The bench's plots from a fabricated bench result (no browser): the heat map's cells are the summary's
per-stratum speed-ups with peers as rows, the memory plot adds the draft only to arms that run it, and
every plot file is written."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from build_tools.bench import ARMS
from build_tools.bench_stats import summarize
from build_tools.plots import heatmap_cells, memory_points, write_plots

SPEED = {"none": 10.0, "lookup-k4": 20.0, "neural-k4": 5.0, "ort-wasm": 8.0}


def record(arm: str, stratum: str, tps: float) -> dict:
    return {
        "arm": arm,
        "setting": "greedy",
        "stratum": stratum,
        "prompt": stratum,
        "decode_tps": tps,
        "ttft_s": 0.5,
        "tokens_per_call": 1.0,
        "time_s": {"draft": 0.1, "verify": 1.0, "sync": 0.5, "other": 0.1, "total": 1.7},
    }


def bench_result(records: list[dict]) -> dict:
    """A bench.json of these records over SPEED's arms."""
    arms = [a for a in ARMS if a.name in SPEED]
    memory = {"weights": 100 << 20, "kv": 50 << 20, "scratch": 10 << 20, "draft": 20 << 20}
    return {
        "arms": [asdict(a) for a in arms],
        "records": records,
        "summary": summarize(records, arms),
        "memory_bytes": memory,
        "load": {"warm": {}},
    }


@pytest.fixture
def result():
    return bench_result(
        [
            record(arm, stratum, tps * (2 if stratum == "code" else 1))
            for arm, tps in SPEED.items()
            for stratum in ("chat", "code")
        ]
    )


def test_heatmap_cells_are_the_per_stratum_speedups(result):
    arms, strata, cells = heatmap_cells(result)
    assert strata == ["chat", "code"] and arms == ["none", "lookup-k4", "neural-k4", "ort-wasm"]
    assert cells[arms.index("lookup-k4")] == [2.0, 2.0] and cells[arms.index("ort-wasm")] == [0.8, 0.8]


def test_memory_points_count_the_draft_only_where_it_runs(result):
    points = {name: (mib, ms) for name, mib, ms in memory_points(result)}
    assert set(points) == {"none", "lookup-k4", "neural-k4"}  # peers' memory is not visible from the page
    assert points["none"][0] == points["lookup-k4"][0] == 160 and points["neural-k4"][0] == 180
    assert points["none"][1] == pytest.approx(1000 / 15.0)  # ms per token at the median over chat (10) and code (20)


def test_every_plot_is_written(result, tmp_path):
    for path in write_plots(result, tmp_path):
        assert path.stat().st_size > 5_000, path


def test_a_run_without_greedy_requests_still_writes_every_plot(tmp_path):
    """bench --prompts 0 (sampled requests only): the heat map of greedy speed-ups has no cells and says so
    (it raised on an empty image and lost the run's plots after bench.json)."""
    result = bench_result([{**record(arm, "chat", tps), "setting": "sampled"} for arm, tps in SPEED.items()])
    assert heatmap_cells(result)[2] == []
    assert all(path.exists() for path in write_plots(result, tmp_path))
