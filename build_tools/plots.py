"""PNG plots of a bench.json (matplotlib, no display): survival by stratum, latency waterfall,
speed-up CDF, break-even by output length, a method x stratum heat map, memory vs latency."""

from __future__ import annotations

from pathlib import Path


def write_plots(result: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, draw in (
        ("survival", _survival),
        ("waterfall", _waterfall),
        ("speedup_cdf", _speedup_cdf),
        ("break_even", _break_even),
        ("heatmap", _heatmap),
        ("memory_latency", _memory_latency),
    ):
        figure, axes = plt.subplots(figsize=(9, 6) if name == "heatmap" else (8, 5))
        draw(result, axes)
        figure.tight_layout()
        path = out / f"{name}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(path)
    return paths


def _greedy_rows(result):
    return [r for r in result["summary"] if r["setting"] == "greedy" and not r["stratum"].startswith("all")]


def _survival(result, axes):
    for row in _greedy_rows(result):
        if row["arm"] in ("lookup-k8", "neural-k4") and row["survival"]:
            style = "-" if row["arm"].startswith("lookup") else "--"
            axes.plot(
                range(0, len(row["survival"]) + 1),
                [1.0] + row["survival"],
                style,
                marker="o",
                label=f"{row['arm']} · {row['stratum']}",
            )
    axes.set(
        title="Acceptance survival S_i by stratum (greedy)",
        xlabel="draft position i",
        ylabel="P(first i drafts accepted)",
        ylim=(0, 1.05),
    )
    axes.legend(fontsize=7, ncol=2)


def _waterfall(result, axes):
    rows = [
        r
        for r in result["summary"]
        if r["setting"] == "greedy" and r["stratum"].startswith("all") and r["time_split_s"]
    ]
    parts = ("draft", "verify", "sync", "other")
    colors = {"draft": "#d9822e", "verify": "#2e62d9", "sync": "#7a9be8", "other": "#b8bdc9"}
    for y, row in enumerate(rows):
        left = 0.0
        for part in parts:
            width = row["time_split_s"][part]
            axes.barh(y, width, left=left, color=colors[part], label=part if y == 0 else None)
            left += width
    axes.set_yticks(range(len(rows)), [r["arm"] for r in rows])
    axes.set(
        title="Median time split per request (greedy, all strata)",
        xlabel="seconds (verify: host side; sync: waiting on the GPU)",
    )
    axes.legend()


def _speedup_cdf(result, axes):
    from .bench_stats import paired_speedups

    records = [r for r in result["records"] if r["stratum"] != "repetitive"]
    for arm in {r["arm"] for r in records} - {"none"}:
        values = sorted(paired_speedups(records, arm, "none"))
        if values:
            axes.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=arm)
    axes.axvline(1.0, color="#888", linewidth=1)
    axes.set(
        title="Per-request decode speed-up vs none (CDF, excl. repetitive)",
        xlabel="speed-up",
        ylabel="fraction of requests",
    )
    axes.legend(fontsize=7)


def _break_even(result, axes):
    """Modelled end-to-end speed-up after L output tokens: (TTFT_none + L / r_none) / (extra load + TTFT + L / r)."""
    rows = {r["arm"]: r for r in result["summary"] if r["setting"] == "greedy" and r["stratum"].startswith("all")}
    base = rows.get("none")
    if not base or not base["decode_tps"]:
        return
    extra = {r["arm"]: r.get("load_extra_s") or 0.0 for r in result["records"]}
    draft_load = result["load"]["warm"].get("draft_session_s") or 0.0
    lengths = list(range(1, 513, 4))
    for arm, row in rows.items():
        if arm == "none" or not row["decode_tps"]:
            continue
        load = extra.get(arm, 0.0) + (draft_load if arm.startswith("neural") else 0.0)
        speedups = [
            ((base["ttft_s"] or 0) + n / base["decode_tps"]) / (load + (row["ttft_s"] or 0) + n / row["decode_tps"])
            for n in lengths
        ]
        axes.plot(lengths, speedups, label=arm)
    axes.axhline(1.0, color="#888", linewidth=1)
    axes.set(
        title="Break-even: speed-up vs output length (incl. load and prefill)",
        xlabel="output tokens",
        ylabel="speed-up vs none",
    )
    axes.legend(fontsize=7)


def heatmap_cells(result) -> tuple[list[str], list[str], list[list[float | None]]]:
    """(arms, strata, speed-up vs none [arm][stratum]) of the greedy setting; peers are rows too."""
    rows = _greedy_rows(result)
    strata = sorted({r["stratum"] for r in rows})
    arms = [a["name"] for a in result["arms"] if any(r["arm"] == a["name"] for r in rows)]
    value = {(r["arm"], r["stratum"]): r["speedup_vs_none"] for r in rows}
    return arms, strata, [[value.get((arm, stratum)) for stratum in strata] for arm in arms]


def _heatmap(result, axes):
    import math

    arms, strata, cells = heatmap_cells(result)
    if not cells:  # a run without greedy requests (bench --prompts 0)
        axes.text(0.5, 0.5, "no greedy requests in this run", ha="center", va="center")
        axes.set_axis_off()
        return
    grid = [[math.nan if v is None else math.log2(v) for v in row] for row in cells]  # log2: 1x is the midpoint
    image = axes.imshow(grid, cmap="RdBu", vmin=-2, vmax=2, aspect="auto")
    axes.set_xticks(range(len(strata)), strata, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(arms)), arms, fontsize=8)
    for i, row in enumerate(cells):
        for j, v in enumerate(row):
            axes.text(j, i, "—" if v is None else f"{v:.2f}", ha="center", va="center", fontsize=7)
    axes.figure.colorbar(image, ax=axes, label="log2 decode speed-up vs none")
    axes.set(title="Decode speed-up vs champion alone (greedy, median per stratum)")


def memory_points(result) -> list[tuple[str, float, float]]:
    """(arm, megabytes the page holds for it, median ms per output token) for our arms: the champion's
    weights, KV capacity and scratch, plus the draft for arms that run it. The peers' memory is not
    visible from the page, so they are not placed."""
    memory = result.get("memory_bytes") or {}
    base = sum(memory.get(k, 0) for k in ("weights", "kv", "scratch"))
    rows = {r["arm"]: r for r in result["summary"] if r["setting"] == "greedy" and r["stratum"].startswith("all")}
    points = []
    for arm in result["arms"]:
        row = rows.get(arm["name"])
        if arm.get("peer") or not row or not row["decode_tps"]:
            continue
        uses_draft = arm["proposer"] in ("neural", "hybrid", "auto")
        megabytes = (base + (memory.get("draft", 0) if uses_draft else 0)) / 2**20
        points.append((arm["name"], megabytes, 1000 / row["decode_tps"]))
    return points


def _memory_latency(result, axes):
    for name, megabytes, ms in memory_points(result):
        axes.scatter(megabytes, ms)
        axes.annotate(name, (megabytes, ms), fontsize=7, xytext=(3, 3), textcoords="offset points")
    axes.set(
        title="Memory held vs median latency per token (greedy, all strata)",
        xlabel="MiB (champion weights + KV capacity + scratch, + draft where used)",
        ylabel="ms per output token",
    )
