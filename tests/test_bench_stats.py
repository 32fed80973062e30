"""Bench statistics over repeated rounds (no browser): a repeated run pairs each arm with champion-alone of the
same round, so drift between rounds cancels in the per-request speed-ups."""

from __future__ import annotations

from build_tools.bench import ARMS
from build_tools.bench_stats import auto_bars, identical_answers, paired_speedups, summarize, table


def record(arm: str, repeat: int, tps: float) -> dict:
    return {"arm": arm, "setting": "greedy", "stratum": "chat", "prompt": "hi", "repeat": repeat, "decode_tps": tps}


def test_repeated_rounds_pair_within_their_round():
    """The machine runs 3x faster in round 1 than in round 0; lookup is 2x champion-alone in both. Pairing
    across rounds (keyed by prompt alone) gives 6x or 2/3x; within rounds, 2x each time."""
    records = [record("none", 0, 10.0), record("lookup-k4", 0, 20.0), record("none", 1, 30.0)]
    records.append(record("lookup-k4", 1, 60.0))
    assert paired_speedups(records, "lookup-k4", "none") == [2.0, 2.0]
    rows = {r["arm"]: r for r in summarize(records, [a for a in ARMS if a.name in ("none", "lookup-k4")])}
    assert rows["lookup-k4"]["requests"] == 2 and rows["lookup-k4"]["per_request_speedup"]["median"] == 2.0


def test_records_of_a_single_round_need_no_repeat_field():
    records = [record("none", 0, 10.0), record("lookup-k4", 0, 15.0)]
    for r in records:
        del r["repeat"]
    assert paired_speedups(records, "lookup-k4", "none") == [1.5]


def test_the_table_shows_the_paired_median_beside_the_ratio_of_medians():
    """Three rounds at different machine speeds; lookup is 2x champion-alone in two and equal in the third.
    The ratio of the medians (40 / 30) says 1.33; the paired median says 2.0."""
    records = [record("none", 0, 10.0), record("lookup-k4", 0, 20.0), record("none", 1, 30.0)]
    records += [record("lookup-k4", 1, 60.0), record("none", 2, 40.0), record("lookup-k4", 2, 40.0)]
    rows = summarize(records, [a for a in ARMS if a.name in ("none", "lookup-k4")])
    line = next(x for x in table(rows).splitlines() if x.startswith("| greedy | chat | lookup-k4 |"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[4] == "1.33" and cells[5] == "2.00"


def test_auto_bars_name_each_stratum_that_misses_a_bar():
    """auto against none and against each stratum's best fixed arm, by paired medians: on chat auto is 1.2x
    none where lookup-k4 is 1.5x (0.8x the best: a miss); on code auto is 0.9x none (a miss) and the best of
    the fixed arms (lookup-k4, 0.8x); the medians over strata are 1.05 for auto and 1.15 for lookup-k4."""
    speed = {("chat", "lookup-k4"): 1.5, ("chat", "auto"): 1.2, ("code", "lookup-k4"): 0.8, ("code", "auto"): 0.9}
    records = []
    for stratum in ("chat", "code"):
        records += [dict(record("none", 0, 10.0), stratum=stratum)]
        records += [dict(record(a, 0, 10.0 * speed[(stratum, a)]), stratum=stratum) for a in ("lookup-k4", "auto")]
    bars = auto_bars(summarize(records, [a for a in ARMS if a.name in ("none", "lookup-k4", "auto")]))
    assert "| chat | 1.50 | 1.20 | 0.80 (lookup-k4) |" in bars and "| code | 0.80 | 0.90 | 1.12 (lookup-k4) |" in bars
    assert "auto >= 0.97x none on 1 of 2 strata (misses: code 0.90)" in bars
    assert ">= 0.9x the best fixed arm on 1 of 2 (misses: chat 0.80 (lookup-k4))" in bars
    assert "median 1.05 against the best fixed arm's 1.15 (lookup-k4)" in bars
    assert auto_bars(summarize(records[:2], [a for a in ARMS if a.name in ("none", "lookup-k4")])) == ""


def test_identical_answers_name_the_arms_whose_answer_differs_from_none():
    """Greedy: every arm must give none's tokens; sampled: the point-mass arms (lookup, auto), by the coupled rule,
    while a hybrid answer may differ. Pairs are by prompt and repeat (the repeat's seed)."""

    def answer(arm, setting, repeat, tokens):
        return dict(record(arm, repeat, 10.0), setting=setting, tokens=tokens)

    records = [answer("none", s, r, [s == "greedy", r]) for s in ("greedy", "sampled") for r in (0, 1)]
    records += [answer("auto", "greedy", r, [True, r]) for r in (0, 1)]
    records += [answer("hybrid-k4", "greedy", 0, [True, 0]), answer("hybrid-k4", "sampled", 0, [7])]
    records += [answer("lookup-k4", "sampled", 0, [False, 0]), answer("lookup-k4", "sampled", 1, [False, 0])]
    records += [answer("auto", "sampled", 1, [False, 1]), {"arm": "auto", "setting": "sampled", "error": "x"}]
    lines = identical_answers(records).splitlines()
    assert lines[0] == (
        "greedy: answers token-identical to none's (same prompt and seed): auto 2/2, hybrid-k4 1/1; all identical"
    )
    assert lines[1] == (
        "sampled: answers token-identical to none's (same prompt and seed): lookup-k4 1/2, auto 1/1; "
        "differing: lookup-k4"
    )
    assert identical_answers(records[4:]) == ""  # no champion-alone answer to compare with
