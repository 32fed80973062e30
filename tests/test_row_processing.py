"""web/row_processing.js against pyodide_app/processors.py, the reference it stands in for on the page's CPU
path: a sampled row's distribution (processedRow) and the correctly rounded sum it needs (exactSum), under Node."""

from __future__ import annotations

import math

import numpy as np

from pyodide_app.processors import SamplingSettings, process_row

from .conftest import run_node_module

# Reads {"rows": [[f32 logits]], "cases": [[row, temperature, topK, topP]], "sums": [[doubles]]} on stdin;
# "nan"/"inf"/"-inf" strings stand for those logits (JSON has none).
SCRIPT = """
import { processedRow, exactSum } from "./web/row_processing.js";
import { readFileSync } from "node:fs";
const input = JSON.parse(readFileSync(0, "utf8"));
const special = { nan: NaN, inf: Infinity, "-inf": -Infinity };
const width = input.rows[0].length;
const data = Float32Array.from(input.rows.flat(), (x) => (x in special ? special[x] : x));
const out = input.cases.map(([row, t, k, p]) => {
  const r = processedRow(data, row, width, t, k, p);
  return r && { indices: r.indices && Array.from(r.indices), probs: Array.from(r.probs) };
});
process.stdout.write(JSON.stringify({ rows: out, sums: input.sums.map(exactSum) }));
"""


def run_js(rows: list[list], cases: list[tuple], sums: list[list[float]] = ()) -> dict:
    payload = {
        "rows": [[json_logit(x) for x in row] for row in rows],
        "cases": [list(c) for c in cases],
        "sums": [list(s) for s in sums],
    }
    return run_node_module(SCRIPT, payload)


def json_logit(x):
    """A logit as JSON carries it: NaN and the infinities as strings (SCRIPT maps them back)."""
    if isinstance(x, str) or math.isfinite(x):
        return x
    return "nan" if x != x else ("inf" if x > 0 else "-inf")


def as_python_row(js: dict, width: int) -> list[float]:
    """processedRow's result as the dense row process_row returns."""
    if js["indices"] is None:
        return js["probs"]
    row = [0.0] * width
    for index, prob in zip(js["indices"], js["probs"]):
        row[index] = prob
    return row


def f32_row(rng: np.random.Generator, width: int, spread: float) -> list[float]:
    return [float(x) for x in rng.normal(0, spread, width).astype(np.float32)]


def test_a_sampled_row_is_processed_as_process_row_does():
    """Every sampled setting the page offers without a repetition penalty (temperature, top-k on or off, top-p
    on or off), on float32 rows: peaked, flat, with tied largest logits (top-k 1 and top-p then keep the lower
    index), one whose top-p candidates (>= max / 4096) do not reach p (the whole row is sorted then), and one
    whose kept set differs between p = 0.9 as a double and as float32 (the GPU's threshold, which Python uses),
    and one whose running mass equals p exactly.
    The same tokens must be kept, and each probability equal Python's to 1e-14 (exp is the JS engine's);
    at least 85% of them bitwise. Fails if ties go to the higher index, top-p compares with the double p or
    stops on `>` instead of `>=`, temperature multiplies by 1 / T, or top-k keeps the wrong count."""
    rng = np.random.default_rng(7)
    width = 3000
    peaked = f32_row(rng, width, 2.5)
    peaked[17], peaked[901] = 19.0, 18.5
    tied = f32_row(rng, width, 1.0)
    tied[40] = tied[12] = tied[2999] = 9.0  # three equal largest logits
    flat = f32_row(rng, width, 0.3)
    # one token of 2/3 and 2,999 of 1/9,000 each (below max / 4096): the candidates hold 2/3 of the mass only
    spread_out = [float(np.float32(math.log(6000.0)))] + [0.0] * (width - 1)
    # p(0) = 0.89999999 sits between float32(0.9) = 0.8999999762 and 0.9: f32 keeps 1 token, the double 2
    straddle = [float(np.float32(x)) for x in [math.log(0.89999999), math.log(0.06), math.log(0.04000001)]]
    straddle += [-math.inf] * (width - 3)  # masked
    quarters = [0.0] * 4 + [-math.inf] * (width - 4)  # p = 1/4 each, exactly: two reach p = 0.5 exactly
    rows = [peaked, tied, flat, spread_out, straddle, quarters]
    cases = [
        (row, t, k, p) for row in range(len(rows)) for t in (0.7, 1.0, 1.3) for k in (0, 1, 40) for p in (1.0, 0.9, 0.5)
    ]
    js = run_js(rows, cases)["rows"]
    bitwise = total = 0
    for (row, t, k, p), result in zip(cases, js):
        expected = process_row(rows[row], SamplingSettings(temperature=t, top_k=k, top_p=p))
        got = as_python_row(result, width)
        assert [i for i, x in enumerate(got) if x > 0] == [i for i, x in enumerate(expected) if x > 0], (row, t, k, p)
        for a, b in zip(got, expected):
            assert math.isclose(a, b, rel_tol=1e-14, abs_tol=0), (row, t, k, p, a, b)
            if b > 0:
                bitwise += a == b
                total += 1
    # Node's exp and CPython's (glibc) differ by an ulp on ~9% of these inputs: 91% of the kept probabilities
    # came out bitwise equal; dividing by T as x * (1 / T) took that to 67%.
    assert bitwise >= 0.85 * total, (bitwise, total)
    kept = {(row, k, p): r["indices"] for (row, t, k, p), r in zip(cases, js) if t == 1.0 and r["indices"]}
    assert kept[(1, 0, 0.5)] == [12, 40] and kept[(1, 1, 0.9)] == [12]  # ties: the lower indices first
    assert kept[(4, 0, 0.9)] == [0]  # p = 0.9 as float32
    assert len(kept[(3, 0, 0.9)]) > 2000  # the whole row sorted
    assert kept[(5, 0, 0.5)] == [0, 1]  # a running mass equal to p reaches it


def test_a_row_python_must_report_is_left_to_python():
    """processedRow returns null for a row with a NaN or +inf logit, or with every token masked: Python then
    processes the row itself and raises its own error (TargetNumericError). Fails if such a row is processed."""
    rows = [[1.0, "nan", 2.0], [1.0, "inf", 0.0], ["-inf", "-inf", "-inf"], ["-inf", 1.0, "-inf"]]
    js = run_js(rows, [(r, 0.7, 0, 0.9) for r in range(4)])["rows"]
    assert js[:3] == [None, None, None]
    assert js[3] == {"indices": [1], "probs": [1.0]}


def test_the_exact_sum_is_pythons_fsum():
    """exactSum must round as math.fsum does (softmax's normaliser and top-p's kept mass): fails with a plain
    left-to-right sum, or without the final half-way correction."""
    rng = np.random.default_rng(3)
    sums = [
        [1e16, 1.0, -1e16],
        [0.1] * 10,
        [1.0, 1e100, 1.0, -1e100],
        [2.0**53, 1.0, 2.0**-60],  # half-way between two doubles, then a hair above: rounds up
        [2.0**53, 1.0, -(2.0**-60)],  # a hair below: rounds down
        [float(x) for x in rng.exponential(1e-3, 5000)],
        [float(x) for x in np.exp(rng.normal(-20, 6, 5000))],
        [],
    ]
    assert run_js([[0.0]], [], sums)["sums"] == [math.fsum(s) for s in sums]
