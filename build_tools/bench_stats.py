"""Bench statistics, a pure module (no browser): survival curves, medians, paired speed-ups, the per-stratum
summary and its Markdown table. build_tools.bench and build_tools.plots both use it."""

from __future__ import annotations

import statistics

SEPARATE_STRATA = ("repetitive",)  # reported apart from the "all" rows
PEERS = ("ort-wasm", "ort-webgpu", "wllama-1t", "wllama-2t")  # the table's "× peer" columns
# onnxruntime-web's WebGPU EP decodes at ~0.05 tok/s on lavapipe here: it runs once, on the first greedy
# prompt; its decode rate is compared against every stratum.
SLOW_PEER = "ort-webgpu"


def survival(records: list[dict]) -> list[float]:
    """S_i = prod_{j<=i} (accepted at j / reached j), pooled over the records."""

    def pooled(key: str) -> list[int]:  # per-position sums; records differ in length (k, adaptive)
        totals: list[int] = []
        for r in records:
            for i, n in enumerate(r.get(key) or []):
                totals.extend([0] * (i + 1 - len(totals)))
                totals[i] += n
        return totals

    reached, accepted = pooled("reached"), pooled("accepted_at")
    out, s = [], 1.0
    for a, n in zip(accepted, reached):
        if not n:
            break
        s *= a / n
        out.append(s)
    return out


def median_of(records, key):
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def paired_speedups(records: list[dict], arm: str, base: str) -> list[float]:
    """Per-request decode speed-up of `arm` over `base` on the same prompt and setting, in the same round of a
    repeated run (records without "repeat" are round 0)."""

    def key(r: dict) -> tuple:
        return r["setting"], r["prompt"], r.get("repeat", 0)

    by_key = {key(r): r for r in records if r["arm"] == base and r.get("decode_tps")}
    return [
        r["decode_tps"] / by_key[key(r)]["decode_tps"]
        for r in records
        if r["arm"] == arm and r.get("decode_tps") and key(r) in by_key
    ]


def summarize(records: list[dict], arms) -> list[dict]:
    """Rows per (setting, stratum, arm); arms: objects with .name, in table order."""
    rows = []
    groups = sorted({(r["setting"], r["stratum"]) for r in records})
    for setting, stratum in groups + [(s, "all (excl. repetitive)") for s in sorted({r["setting"] for r in records})]:
        pool = [
            r
            for r in records
            if r["setting"] == setting
            and (r["stratum"] == stratum or (stratum.startswith("all") and r["stratum"] not in SEPARATE_STRATA))
        ]
        base = median_of([r for r in pool if r["arm"] == "none"], "decode_tps")
        peers = {p: median_of([r for r in pool if r["arm"] == p], "decode_tps") for p in PEERS}
        if setting == "greedy" and peers[SLOW_PEER] is None:  # measured once per run (see SLOW_PEER)
            peers[SLOW_PEER] = median_of([r for r in records if r["arm"] == SLOW_PEER], "decode_tps")
        for arm in arms:
            mine = [r for r in pool if r["arm"] == arm.name]
            if not mine:
                continue
            tps = median_of(mine, "decode_tps")
            pairs = paired_speedups(pool, arm.name, "none")
            rows.append(
                {
                    "setting": setting,
                    "stratum": stratum,
                    "arm": arm.name,
                    "requests": len(mine),
                    "errors": sum(1 for r in mine if "error" in r),
                    "decode_tps": tps,
                    "speedup_vs_none": tps / base if tps and base else None,
                    "speedup_vs_ort_wasm": tps / peers["ort-wasm"] if tps and peers["ort-wasm"] else None,
                    "speedup_vs_ort_webgpu": tps / peers["ort-webgpu"] if tps and peers["ort-webgpu"] else None,
                    "speedup_vs_wllama_1t": tps / peers["wllama-1t"] if tps and peers["wllama-1t"] else None,
                    "speedup_vs_wllama_2t": tps / peers["wllama-2t"] if tps and peers["wllama-2t"] else None,
                    "per_request_speedup": quartiles(pairs),
                    "tokens_per_call": median_of(mine, "tokens_per_call"),
                    "ttft_s": median_of(mine, "ttft_s"),
                    "survival": survival(mine),
                    "time_split_s": {
                        k: statistics.median([r["time_s"][k] for r in mine if r.get("time_s")])
                        for k in ("draft", "verify", "sync", "other")
                    }
                    if any(r.get("time_s") for r in mine)
                    else None,
                }
            )
    return rows


def quartiles(values: list[float]):
    if not values:
        return None
    if len(values) == 1:
        return {"min": values[0], "q1": values[0], "median": values[0], "q3": values[0], "max": values[0]}
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"min": min(values), "q1": q1, "median": median, "q3": q3, "max": max(values)}


def table(rows: list[dict]) -> str:
    """Markdown rows. "× none" is the ratio of the medians; "× none, paired" the median of per-request
    speed-ups (each answer over champion-alone's answer to the same prompt in the same round), the one to read
    per stratum: pairing cancels drift between rounds."""
    fmt = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
    lines = [
        "| setting | stratum | arm | decode tok/s | × none | × none, paired | × ort-wasm | × ort-webgpu | "
        "× wllama (1 thread) | × wllama (2 threads) | tokens/call | TTFT s | n |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paired = (r["per_request_speedup"] or {}).get("median")
        lines.append(
            f"| {r['setting']} | {r['stratum']} | {r['arm']} | {fmt(r['decode_tps'], '.2f')} | "
            f"{fmt(r['speedup_vs_none'], '.2f')} | {fmt(paired, '.2f')} | "
            f"{fmt(r['speedup_vs_ort_wasm'], '.2f')} | {fmt(r['speedup_vs_ort_webgpu'], '.2f')} | "
            f"{fmt(r.get('speedup_vs_wllama_1t'), '.2f')} | {fmt(r.get('speedup_vs_wllama_2t'), '.2f')} | "
            f"{fmt(r['tokens_per_call'], '.2f')} | "
            f"{fmt(r['ttft_s'], '.2f')} | {r['requests']}{' (' + str(r['errors']) + ' failed)' if r['errors'] else ''} "
            "|"
        )
    return "\n".join(lines) + "\n"


AUTO = "auto"
BAR_VS_NONE = 0.97  # issue 21: auto >= 0.97x champion-alone on every stratum
BAR_VS_BEST = 0.9  # and >= 0.9x the stratum's best fixed arm


def auto_bars(rows: list[dict]) -> str:
    """The auto scheduler's bars, per setting, from summarize's rows: each arm's paired speed-up over
    champion-alone by stratum (our arms only: peers are other engines), auto over the stratum's best fixed arm,
    the medians over the strata (excluding SEPARATE_STRATA), and a line naming every stratum that misses a bar.
    Empty when no auto arm ran."""
    parts = []
    for setting in sorted({r["setting"] for r in rows if r["arm"] == AUTO}):
        mine = [r for r in rows if r["setting"] == setting and not r["stratum"].startswith("all")]
        paired = {(r["stratum"], r["arm"]): (r["per_request_speedup"] or {}).get("median") for r in mine}
        arms = [a for a in dict.fromkeys(r["arm"] for r in mine) if a not in PEERS and a != "none"]
        parts.append(_bars_of_setting(setting, paired, arms))
    return "\n".join(parts)


def _bars_of_setting(setting: str, paired: dict[tuple[str, str], float | None], arms: list[str]) -> str:
    """auto_bars for one setting; paired: (stratum, arm) -> median paired speed-up over none."""
    fixed = [a for a in arms if a != AUTO]
    strata = sorted({s for s, _ in paired})
    lines = [f"{setting}: paired speed-up over none, median per stratum", ""]
    lines += ["| stratum | " + " | ".join(arms) + " | auto / best |", "|---" * (len(arms) + 2) + "|"]
    misses_none, misses_best = [], []
    for stratum in strata:
        auto = paired.get((stratum, AUTO))
        best, best_arm = max(((v, a) for a in fixed if (v := paired.get((stratum, a))) is not None), default=(None, ""))
        versus = auto / best if auto and best else None
        if auto is not None and auto < BAR_VS_NONE:
            misses_none.append(f"{stratum} {auto:.2f}")
        if versus is not None and versus < BAR_VS_BEST:
            misses_best.append(f"{stratum} {versus:.2f} ({best_arm})")
        cells = " | ".join(_cell(paired.get((stratum, a))) for a in arms)
        lines.append(f"| {stratum} | {cells} | {_cell(versus)} ({best_arm}) |")
    medians = {a: _median([paired.get((s, a)) for s in strata if s not in SEPARATE_STRATA]) for a in arms}
    excluded = ", ".join(SEPARATE_STRATA)
    lines.append(f"| median (excl. {excluded}) | " + " | ".join(_cell(medians[a]) for a in arms) + " | |")
    best_median, best_median_arm = max(((m, a) for a in fixed if (m := medians[a]) is not None), default=(None, ""))
    n = len(strata)
    lines += [
        "",
        f"{setting}: auto >= {BAR_VS_NONE}x none on {n - len(misses_none)} of {n} strata{_misses(misses_none)}; "
        f">= {BAR_VS_BEST}x the best fixed arm on {n - len(misses_best)} of {n}{_misses(misses_best)}; median "
        f"{_cell(medians.get(AUTO))} against the best fixed arm's {_cell(best_median)} ({best_median_arm})",
        "",
    ]
    return "\n".join(lines)


def _misses(misses: list[str]) -> str:
    return f" (misses: {', '.join(misses)})" if misses else ""


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


# Arms whose every draft is a point mass: by the coupled rule (pyodide_app/acceptance.py) a sampled answer of theirs
# is champion-alone's of the same seed, token for token. Greedy: every arm's is.
POINT_MASS_ARMS = ("lookup-k2", "lookup-k4", "lookup-k8", "lookup-adaptive", AUTO)


def identical_answers(records: list[dict]) -> str:
    """Per setting and arm, how many answers are token-identical to champion-alone's of the same prompt and
    repeat (same seed), for the arms that must give them: every arm greedy, POINT_MASS_ARMS sampled. A line per
    setting; a miss is named. Empty without such pairs."""
    base = {(r["setting"], r["prompt"], r.get("repeat", 0)): r["tokens"] for r in records if _answered(r, "none")}
    counts: dict[tuple[str, str], list[int]] = {}
    for r in records:
        if r["arm"] == "none" or r["arm"] in PEERS or not _answered(r):
            continue
        expected = base.get((r["setting"], r["prompt"], r.get("repeat", 0)))
        if expected is None or (r["setting"] != "greedy" and r["arm"] not in POINT_MASS_ARMS):
            continue
        same_total = counts.setdefault((r["setting"], r["arm"]), [0, 0])
        same_total[0] += r["tokens"] == expected
        same_total[1] += 1
    lines = []
    for setting in sorted({s for s, _ in counts}):
        cells = [f"{arm} {same}/{total}" for (s, arm), (same, total) in counts.items() if s == setting]
        misses = [arm for (s, arm), (same, total) in counts.items() if s == setting and same < total]
        verdict = f"; differing: {', '.join(misses)}" if misses else "; all identical"
        lines.append(
            f"{setting}: answers token-identical to none's (same prompt and seed): {', '.join(cells)}{verdict}"
        )
    return "\n".join(lines)


def _answered(record: dict, arm: str | None = None) -> bool:
    """The record holds an answer's tokens (of `arm`, when given)."""
    return (arm is None or record["arm"] == arm) and "tokens" in record and "error" not in record
