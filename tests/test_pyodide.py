"""pyodide_app is standard-library only: every module imports inside real Pyodide (npm
package under Node 20), and the same code gives the same numbers there as in CPython."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, run_node, run_node_module

PACKAGE = ROOT / "pyodide_app"
RUNNER = ROOT / "tests" / "pyodide_runner.mjs"
# Modules that bind native libraries (wgpu-py, onnxruntime) live here; the browser
# has its own bindings instead. Everything else must run in Pyodide.
NATIVE_ONLY_PREFIX = "pyodide_app.native"

# The same short computation runs in both interpreters; its JSON result must match.
PROBE = r"""
import importlib, json, sys
for name in MODULES:
    importlib.import_module(name)
outside = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names) - ALLOWED)

from pyodide_app.rng import philox4x32_10
from pyodide_app.table_model import TableModel
from pyodide_app.champion import ReferenceChampion
from pyodide_app.orchestrator import Emitted, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings
from pyodide_app.proposers import ModelDraft, PromptLookup

model = TableModel.random_ngram(11, order=2, seed=3)
draft = TableModel.random_ngram(11, order=1, seed=4)
answers = {}
for name, proposer in [("lookup", PromptLookup()), ("draft", ModelDraft(draft, SamplingSettings(temperature=0.8)))]:
    for temperature in (0, 0.9):
        settings = SamplingSettings(temperature=temperature, top_p=0.95, repetition_penalty=1.1)
        config = GenerationConfig(max_new_tokens=40, k=4, settings=settings, seed=2024)
        run = Orchestrator(ReferenceChampion(model), proposer, config, lambda t: bytes([97 + t]))
        tokens = [t for e in run.generate([1, 2, 3, 1, 2]) if isinstance(e, Emitted) for t in e.tokens]
        answers[f"{name}@{temperature}"] = tokens
result = json.dumps({
    "outside_stdlib": outside,
    "philox": list(philox4x32_10((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0))),
    "answers": answers,
})
"""


def portable_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not name.startswith(NATIVE_ONLY_PREFIX):
            names.append(name)
    return names


def probe_code() -> str:
    allowed = {"__main__", "pyodide_app", "_pyodide", "pyodide", "js", "pyodide_js", "_pyodide_core"}
    return f"MODULES = {portable_modules()!r}\nALLOWED = {allowed!r}\n" + PROBE


def run_in_cpython() -> dict:
    scope: dict = {}
    exec(compile(probe_code(), "<probe>", "exec"), scope)
    return json.loads(scope["result"])


def run_in_pyodide() -> dict:
    return run_pyodide(probe_code())


def run_pyodide(code: str, extra_files: dict[str, str] | None = None) -> dict:
    """The JSON `result` of `code` run in real Pyodide (Node) with pyodide_app (and extra_files) under /app."""
    if not (ROOT / "node_modules" / "pyodide").is_dir():
        pytest.fail("node_modules/pyodide is required (run `make test`, which runs npm ci)")
    files = {str(p.relative_to(ROOT)): p.read_text() for p in PACKAGE.rglob("*.py")}
    return run_node([str(RUNNER)], {"files": {**files, **(extra_files or {})}, "code": code}, timeout=300)


def test_module_list_covers_the_core():
    names = portable_modules()
    for core in (
        "pyodide_app.rng",
        "pyodide_app.processors",
        "pyodide_app.acceptance",
        "pyodide_app.orchestrator",
        "pyodide_app.transaction",
        "pyodide_app.proposers.prompt_lookup",
        "pyodide_app.table_model",
    ):
        assert core in names


def test_cpython_imports_nothing_outside_the_standard_library():
    code = (
        f"import importlib, sys\nsys.path.insert(0, {str(ROOT)!r})\nfor m in {portable_modules()!r}: "
        "importlib.import_module(m)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - "
        "{'__main__', 'pyodide_app'}))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_portable_module_runs_in_pyodide_with_identical_results():
    browser = run_in_pyodide()
    native = run_in_cpython()
    assert browser["outside_stdlib"] == []
    assert browser["philox"] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]
    assert browser["answers"] == native["answers"]
    assert all(len(tokens) == 40 for tokens in browser["answers"].values())


TOKENIZER_PROBE = r"""
import json, time
from pyodide_app.tokenizer import Tokenizer
tokenizer = Tokenizer.from_json(open("/app/tokenizer.json").read())
texts = json.loads(open("/app/texts.json").read())
ids = [tokenizer.encode(t) for t in texts[:-1]]
start = time.perf_counter()
prose = tokenizer.encode(texts[-1])
elapsed = time.perf_counter() - start
result = json.dumps({"ids": ids + [prose], "tokens_per_second": len(prose) / elapsed})
"""
PROSE = (
    "Speculative decoding lets a small draft model propose several tokens that the large model then checks in a "
    "single pass. When the proposals are right, the answer arrives faster; when they are wrong, a correction is "
    "sampled so that the output follows exactly the distribution of the large model. "
)


def test_tokenizer_in_pyodide_gives_identical_ids(real_package):
    from pyodide_app.tokenizer import Tokenizer

    from .tokenizer_corpus import corpus

    texts = corpus()[:200] + [PROSE * 12]
    tokenizer_json = (real_package / "tokenizer.json").read_text()
    browser = run_pyodide(TOKENIZER_PROBE, {"tokenizer.json": tokenizer_json, "texts.json": json.dumps(texts)})
    native = Tokenizer.from_json(tokenizer_json)
    assert browser["ids"] == [native.encode(t) for t in texts]
    import time

    fresh = Tokenizer.from_json(tokenizer_json)
    start = time.perf_counter()
    count = len(fresh.encode(texts[-1]))
    cpython = count / (time.perf_counter() - start)
    print(
        f"\n[tokenizer] English prose (fresh tokenizer; repeated words hit its BPE cache): CPython {cpython:,.0f} "
        "tokens/s, "
        f"Pyodide (Node 20) {browser['tokens_per_second']:,.0f} tokens/s"
    )


DRAFT_ROW_PROBE = r"""
import json
from array import array
from pyodide.code import run_js
from pyodide_app.acceptance import ReducedRow, stochastic_decision
from pyodide_app.browser.onnx_session import BrowserDraftRuntime
from pyodide_app.sampling import SeededDraws

masses = [0.5, 0.25, 0.125, 0.125]  # exact in f32
ids = [7, 2, 9, 4]
result_js = run_js(f"({{token: 9, probs: new Float32Array({masses}), entropyBits: 1.75}})")
runner = run_js("({step() { return null; }, reset() {}, truncate() {}})")
runtime = BrowserDraftRuntime(runner, {"config": {"vocab_size": 12}, "id_map": ids})
steps = runtime.step([1, 2], 0.7, 0.5)
wait = next(steps)
wait.resolve(result_js)  # what the driver does with the promise's value
try:
    steps.send(None)
except StopIteration as done:
    step = done.value
row = step.row
target = [[0.0] * 12, [1 / 12] * 12]
target[0][2] = target[0][3] = 0.5  # p(9) = 0: the draft is rejected, the residual reads q
list_row = ReducedRow(ids, masses)
decision = stochastic_decision(target, [9], [row], SeededDraws(5), 0, 4)
list_decision = stochastic_decision(target, [9], [list_row], SeededDraws(5), 0, 4)
result = json.dumps({
    "values_type": type(row.values).__name__,
    "probs_type": type(row.probs).__name__,
    "probs": [row.prob(t) for t in range(12)],
    "dense": row.dense(12),
    "finite": row.is_finite(),
    "decision": [decision.accepted, decision.terminal, decision.kind],
    "list_decision": [list_decision.accepted, list_decision.terminal, list_decision.kind],
})
"""


CHAMPION_ROWS_PROBE = r"""
import json
from pyodide.code import run_js
from pyodide_app.browser.onnx_session import BrowserChampionRuntime

rows_js = run_js("({rows: Float32Array.from([0.5, -1.25, 3.0, 0.1, 7.5, -2.0, 0.25, 0.0, 1e-3]), "
                 "best: Int32Array.from([2, 1, -1])})")
runner = run_js("({step() { return null; }, reset() {}, truncate() {}})")
runtime = BrowserChampionRuntime(runner, {"config": {"vocab_size": 3}})
steps = runtime.run([4, 5, 6])
next(steps).resolve(rows_js)  # what the driver does with the promise's value
try:
    steps.send(None)
except StopIteration as done:
    rows = done.value
middle = rows[1]
result = json.dumps({
    "type": type(rows).__name__,
    "count": len(rows),
    "made_after_one_read": sorted(rows.made),
    "middle": middle,
    "all": [list(row) for row in rows],
    "best": rows.best,
})
"""


def test_a_browser_champion_call_makes_lists_of_the_rows_read_only():
    """The CPU champion's rows reach Python as one copy of the JS Float32Array [T * V] and the argmax of
    each row (rowArgmax); a row becomes a list only when the acceptance rule reads it (~3 ms for 49,152
    floats; a sampled round rejected at its first draft reads one row, a greedy round none). Fails if
    the runtime makes every row a list up front (made would hold all three), slices a row at the wrong
    offset (the values would differ) or drops the argmaxes."""
    browser = run_pyodide(CHAMPION_ROWS_PROBE)
    assert browser["type"] == "RowsOnDemand" and browser["count"] == 3
    assert browser["made_after_one_read"] == [1]
    assert browser["middle"] == pytest.approx([0.1, 7.5, -2.0], rel=1e-7)  # 0.1 as float32
    assert browser["all"][0] == [0.5, -1.25, 3.0] and browser["all"][2][:2] == [0.25, 0.0]
    assert browser["best"] == [2, 1, -1]


SAMPLED_ROWS_PROBE = r"""
import json
from pyodide.code import run_js
from pyodide_app.acceptance import PointMass
from pyodide_app.browser.onnx_session import BrowserChampionRuntime
from pyodide_app.champion import ProcessedRows, VerifyRequest, decide
from pyodide_app.processors import FLOAT, SamplingSettings, process_row
from pyodide_app.sampling import SeededDraws

V = 500
rows_js = run_js('''(() => {
  const V = 500, rows = new Float32Array(3 * V);
  for (let i = 0; i < rows.length; i++) rows[i] = 4 * Math.sin(i * 12.9898);
  const { processedRow, rowArgmax } = globalThis.rowProcessing;
  return { rows, best: rowArgmax(rows, V), processed: (r, t, k, p) => processedRow(rows, r, V, t, k, p) };
})()''')
runner = run_js("({step() { return null; }, reset() {}, truncate() {}})")
runtime = BrowserChampionRuntime(runner, {"config": {"vocab_size": V}})
out = {}
for name, settings in {
    "top_p": SamplingSettings(temperature=0.8, top_p=0.9),
    "full": SamplingSettings(temperature=1.2),
    "penalty": SamplingSettings(temperature=0.8, top_p=0.9, repetition_penalty=1.3),
}.items():
    cases = []
    for seed in range(6):
        steps = runtime.run([4, 5, 6])
        next(steps).resolve(rows_js)
        try:
            steps.send(None)
        except StopIteration as done:
            rows = done.value
        plain = [rows.convert(j) for j in range(3)]  # the rows as Python lists, beside `rows`
        drafts = (rows.best[0], rows.best[1])
        request = VerifyRequest((1, 2, 3), 2, drafts, tuple(map(PointMass, drafts)), seed, settings, SeededDraws(seed))
        js, py = decide(rows, request), decide(plain, request)
        cases.append({
            "same": [js.accepted, js.terminal] == [py.accepted, py.terminal],
            "made": sorted(rows.made),
            "rows": [list(ProcessedRows(rows, request, FLOAT)[j]) for j in range(3)],
            "python_rows": [process_row(plain[j], settings, request.context + drafts[:j]) for j in range(3)],
        })
    out[name] = cases
result = json.dumps(out)
"""


def test_a_sampled_browser_champion_row_is_processed_by_the_page_not_made_a_list():
    """A sampled round on the CPU path takes its rows' distributions from row_processing.js's processedRow
    (a list, temperature, softmax and top-p of a 49,152-wide row took ~31 ms in Pyodide under Node): no row
    becomes a list, and the decision and processed rows are Python's (probabilities to 1e-14). With a
    repetition penalty (which needs the row's history) Python processes the rows itself. Fails if the runtime's
    processor is not used (rows made lists), is used under a penalty (the rows would differ), or returns rows
    wrongly shaped or for the wrong row (the decision or the rows would differ)."""
    browser = run_pyodide(SAMPLED_ROWS_PROBE)
    for name, cases in browser.items():
        for case in cases:
            assert case["same"], name
            for row, python_row in zip(case["rows"], case["python_rows"]):
                assert len(row) == len(python_row) == 500
                for a, b in zip(row, python_row):
                    assert a == pytest.approx(b, rel=1e-14, abs=0), name
            assert (case["made"] == []) == (name != "penalty"), (name, case["made"])


def test_the_browser_row_argmax_is_pythons_first_largest_and_refuses_rows_that_are_not_finite():
    """web/onnx_session.js's rowArgmax under Node decides greedy rounds on the CPU path, so it must be the
    champion's argmax exactly: the first index of the largest value (processors.argmax's tie rule), on
    float32 rows, and -1 (the Python path reads the row and raises or handles it) where a row holds a NaN,
    +inf or -inf. Fails with a `>=` comparison (the last of ties), or with a NaN row given an index."""
    script = """
import { rowArgmax } from "./web/row_processing.js";
const rows = Float32Array.from([1, 5, 5, 2,  -3, -1, -1, -2,  0, NaN, 9, 1,  1, Infinity, 0, 0,  -Infinity, 0, 1, 1,
                                7, 0, 0, 7]);
process.stdout.write(JSON.stringify(Array.from(rowArgmax(rows, 4))));
"""
    assert run_node_module(script, timeout=60) == [1, 1, -1, -1, -1, 0]
    from pyodide_app.processors import argmax

    for row, expected in (([1, 5, 5, 2], 1), ([-3, -1, -1, -2], 1), ([7, 0, 0, 7], 0)):
        assert argmax(row) == expected  # the Python rule the JS one stands in for


def test_a_browser_draft_row_is_read_from_one_copy_with_the_same_values():
    """A sampled neural round on the CPU path reads the draft's q row in Python (q(d), and the residual after a
    rejection). Read through the JsProxy of the JS Float32Array, each element crosses the FFI (a rejected
    12,288-entry row: 3.9 ms warm in Pyodide under Node, ~40 ms on a first pass; 0.5 ms from a copy): the
    runtime hands Python one array('f') copy, and the GPU still gets the JS array. Fails if the runtime passes no copy
    (values would be the JsProxy) or the copy reads the bytes wrongly (the values would differ)."""
    browser = run_pyodide(DRAFT_ROW_PROBE)
    assert browser["values_type"] == "array"
    assert browser["probs_type"] == "JsProxy"  # what the GPU champion writes, uncopied
    expected = [0.0] * 12
    for token, mass in zip([7, 2, 9, 4], [0.5, 0.25, 0.125, 0.125]):
        expected[token] = mass
    assert browser["probs"] == expected
    assert browser["dense"] == expected
    assert browser["finite"] is True
    assert browser["decision"] == browser["list_decision"]
    assert browser["decision"][0] == 0 and browser["decision"][1] in (2, 3)


KV_ROLLBACK_PROBE = """
import { OnnxKVSession } from "./web/onnx_session.js";
const [heads, dim] = [3, 4];
const value = (h, position, d) => h * 10000 + position * 10 + d;  // exact in float32
class Tensor { constructor(type, data, dims) { Object.assign(this, { type, data, dims }); } }
const fed = [];  // per run: the past rows the session fed, as [head][row] = position (or -1 if a row is torn)
const session = { async run(feeds) {
  const past = feeds.past_key_0, rows = past.dims[2], added = feeds.input_ids.dims[1];
  fed.push([...Array(heads)].map((_, h) => [...Array(rows)].map((_, r) => {
    const at = (h * rows + r) * dim, position = (past.data[at] - h * 10000) / 10;
    const whole = [...Array(dim)].every((_, d) => past.data[at + d] === value(h, r, d));
    return whole && position === r ? position : -1;
  })));
  const out = { token: { data: [0n] }, probs: { data: new Float32Array(1) } };
  for (const name of ["present_key_0", "present_value_0"]) {  // each output its own array, as onnxruntime-web's
    const present = new Float32Array(heads * (rows + added) * dim);  // [1, heads, rows + added, dim]
    for (let h = 0; h < heads; h++) for (let r = 0; r < rows + added; r++) for (let d = 0; d < dim; d++)
      present[(h * (rows + added) + r) * dim + d] = value(h, r, d);
    out[name] = new Tensor("float32", present, [1, heads, rows + added, dim]);
  }
  return out;
} };
const kv = new OnnxKVSession({ Tensor }, session, { config: { n_layers: 1, n_kv_heads: heads, head_dim: dim } });
await kv.step([1, 2, 3, 4, 5], 0, 0.5);
await kv.step([6, 7, 8], 0, 0.5);   // 8 rows held
kv.truncate(6);                      // a rejection keeps 6
await kv.step([9], 0, 0.5);          // feeds 6 rows, holds 7
await kv.step([10, 11, 12], 0, 0.5); // holds 10
kv.truncate(7);
await kv.step([13], 0, 0.5);
kv.truncate(3);
await kv.step([14], 0, 0.5);
process.stdout.write(JSON.stringify({ rows: fed.map((run) => run.map((head) => head.length)),
                                      torn: fed.flat(2).filter((p) => p < 0).length }));
"""


def test_a_rolled_back_host_kv_cache_feeds_every_heads_kept_rows_in_order():
    """After a rejection the CPU champion and the draft feed only the kept rows of each head's KV cache
    (onnx_session.js moves them down within the cache's own array rather than copying 78 MB at 1,700 tokens).
    Every fed row of every head must be that head's row at that position, whole. Fails if the rows of head
    h > 0 are read from the kept-length offset (rows of the wrong head or position), if only head 0's rows
    are kept, or if the rollback is ignored."""
    seen = run_node_module(KV_ROLLBACK_PROBE, timeout=60)
    assert seen["rows"] == [[0] * 3, [5] * 3, [6] * 3, [7] * 3, [7] * 3, [3] * 3]
    assert seen["torn"] == 0
