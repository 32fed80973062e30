"""The float32-weights champion graph (export_onnx dense=True, all_rows): the GGUF values d*q + m as plain
float32 weights and batch-invariant attention. Groundwork for the fast CPU champion (issue 16).

Each row's logits must be bitwise identical whether it is scored alone or among T = 1..9 rows, at
context lengths on both sides of the 256-key attention block; and they must match the numpy reference.
The invariance tests run a model with SmolLM2's head size (64): with the tiny synthetic model's 16, even the
bug they exist for passes. Bug they catch: attention through onnxruntime's MatMul with the call's rows as
its M dimension (a row changes in its last bits with T: 3.7e-5 on this model, 1.1e-5 on SmolLM2's q.k),
or unpadded key lengths.
"""

from __future__ import annotations

import numpy as np
import pytest

from build_tools.export_onnx import KEY_BLOCK, export_llama
from build_tools.reference import ReferenceModel
from build_tools.synth import random_model, synth_models, tiny_tokenizer
from pyodide_app.native.onnx_champion import OnnxChampionRuntime

T_MAX = 9


def dense_graph(champion, folder):
    path = folder / "champion_dense.onnx"
    entry = export_llama(champion, champion.config.n_layers, path, all_rows=True, dense=True)
    return OnnxChampionRuntime(path, entry, threads=1), ReferenceModel(champion.config, champion.tensors), path


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    champion, _ = synth_models(0)
    return dense_graph(champion, tmp_path_factory.mktemp("dense"))


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """2 layers with SmolLM2's attention shape: head size 64, 4 query heads over 2 KV heads."""
    champion = random_model(tiny_tokenizer(), 5, 2, "wide", d_model=256, d_ffn=512, n_heads=4, n_kv_heads=2)
    return dense_graph(champion, tmp_path_factory.mktemp("wide"))


def prefill(runtime, tokens, chunk=64):
    runtime.truncate(0)
    for start in range(0, len(tokens), chunk):
        runtime.run_array(tokens[start : start + chunk])


@pytest.mark.parametrize("position", [5, KEY_BLOCK - 4, KEY_BLOCK + 3])
def test_each_rows_logits_are_bitwise_identical_for_every_t(wide, position):
    runtime, _, _ = wide
    rng = np.random.default_rng(position)
    context = [int(t) for t in rng.integers(3, runtime.vocab_size, position)]
    rows = [int(t) for t in rng.integers(3, runtime.vocab_size, T_MAX)]
    prefill(runtime, context)
    single = []
    for token in rows:  # champion-alone: one row per call
        single.append(runtime.run_array([token])[0].copy())
    for t in range(1, T_MAX + 1):  # speculation: T rows per call from the same committed length
        runtime.truncate(position)
        batch = runtime.run_array(rows[:t])
        for i in range(t):
            assert np.array_equal(batch[i], single[i]), f"row {i} differs at T={t} (position {position})"


def test_logits_match_the_numpy_reference(dense):
    runtime, reference, _ = dense
    tokens = [1, 70, 80, 90, 33, 12, 250, 7]
    prefill(runtime, [])
    runtime.truncate(0)
    got = runtime.run_array(tokens)
    expected = reference.forward(tokens, reference.new_cache(len(tokens)), 0)
    assert float(np.abs(got - expected).max()) < 1e-4


def test_rows_are_bitwise_identical_for_every_t_in_onnxruntime_web(wide, tmp_path):
    """The browser's runtime (wasm SIMD, under Node): after a 40-token context (its KV rows computed here
    natively), row i of a T-row call is the same for every T > i."""
    import onnxruntime

    from .test_reference_and_onnx import empty_past, run_in_onnxruntime_web

    runtime, _, path = wide
    session = runtime.session
    config = {"n_layers": session.layers, "n_kv_heads": session.kv_heads, "head_dim": session.head_dim}
    rng = np.random.default_rng(40)
    context = rng.integers(3, runtime.vocab_size, (1, 40)).astype(np.int64)
    native = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    scalars = {"temperature": np.array([0.0], np.float32), "uniform": np.array([1.0], np.float32)}
    names = [o.name for o in native.get_outputs() if o.name.startswith("present_")]
    presents = native.run(names, {"input_ids": context, **empty_past(config), **scalars})
    past = {name.replace("present_", "past_"): value for name, value in zip(names, presents)}
    tokens = [1, 70, 80, 90, 33, 12, 250, 7, 41]
    rows = {}
    for t in range(1, T_MAX + 1):
        feeds = {"input_ids": np.array([tokens[:t]], np.int64), **past}
        out = run_in_onnxruntime_web(path, feeds, [{"temperature": 0.0, "uniform": 1.0}], ["all_logits"])[0]
        rows[t] = np.asarray(out["all_logits"], np.float32).reshape(t, -1)
    for t in range(2, T_MAX + 1):
        for i in range(t - 1):
            assert np.array_equal(rows[t][i], rows[i + 1][i]), f"row {i} differs between T={i + 1} and T={t}"


def test_weightless_graph_filled_from_the_package_shards_gives_the_same_logits(dense, synth_package, tmp_path):
    """One download for both backends: the graph file holds no weights; native/dense_champion.py builds them
    from the champion shards (its own dequantiser) and the logits are bitwise those of the full graph."""
    import json

    from pyodide_app.native.dense_champion import open_dense_runtime

    runtime, _, path = dense
    champion, _ = synth_models(0)
    light = tmp_path / "champion_cpu.onnx"
    entry = export_llama(champion, champion.config.n_layers, light, all_rows=True, dense=True, weightless=True)
    assert light.stat().st_size < path.stat().st_size / 10
    manifest = json.loads((synth_package / "manifest.json").read_text())
    filled = open_dense_runtime(synth_package, manifest, light, entry)
    tokens = [1, 70, 80, 90, 33, 12, 250, 7]
    runtime.truncate(0)
    assert np.array_equal(filled.run_array(tokens), runtime.run_array(tokens))


def test_the_workers_dequantiser_equals_the_native_one(synth_package):
    """web/dequant.js (under Node) and native/dense_champion.py build bitwise the same float32 weights."""
    import base64
    import json

    from pyodide_app.manifest import read_tensor_bytes
    from pyodide_app.native.dense_champion import dequantize

    from .conftest import run_node_module

    manifest = json.loads((synth_package / "manifest.json").read_text())
    names = [n for n, t in manifest["champion"]["tensors"].items() if t["format"] in ("q4_1", "q8_0")][:4]
    names += [n for n, t in manifest["champion"]["tensors"].items() if t["format"] == "q8_0"][:1]
    script = """
import { dequantize, tensorBytes } from "./web/dequant.js";
import { readFileSync } from "node:fs";
const [folder, names] = JSON.parse(readFileSync(0, "utf8"));
const manifest = JSON.parse(readFileSync(folder + "/manifest.json", "utf8"));
const files = new Map(Object.keys(manifest.files).map((n) => [n, new Uint8Array(readFileSync(folder + "/" + n))]));
const out = {};
for (const name of names) {
  const values = dequantize(tensorBytes(files, manifest.champion.tensors[name]), manifest.champion.tensors[name]);
  out[name] = Buffer.from(values.buffer).toString("base64");
}
process.stdout.write(JSON.stringify(out));
"""
    web = run_node_module(script, [str(synth_package), names])
    assert {manifest["champion"]["tensors"][n]["format"] for n in names} == {"q4_1", "q8_0"}
    for name in names:
        spec = manifest["champion"]["tensors"][name]
        native = dequantize(read_tensor_bytes(synth_package, spec), spec["format"], spec["shape"])
        assert base64.b64decode(web[name]) == native.tobytes(), name


def test_prefill_chunks_stay_full_with_one_row_attention():
    """A 1,700-token prompt: the older graph materialised [rows, keys, head_dim] products per head, so its
    chunks shrank to 16 rows near 1,792 keys; the shipped form keeps only [rows, keys] scores and prefills
    64 rows per call (its measured prefill at 1,500 tokens: 10.5 s instead of 29 s natively)."""
    from pyodide_app.cpu_champion import CpuChampion, attention_bytes_per_row_key

    class Runtime:
        vocab_size, cached = 10, []

    config = {"n_heads": 9, "head_dim": 64}
    entry = {"external_weights": {"w": "t"}, "config": config, "attention": "gemv"}
    older = {"external_weights": {"w": "t"}, "config": config}
    assert attention_bytes_per_row_key(entry) == 4 * 9 * 3 and attention_bytes_per_row_key(older) == 4 * 9 * 64
    shipped = Runtime()
    shipped.attention_bytes_per_row_key = attention_bytes_per_row_key(entry)
    before = Runtime()
    before.attention_bytes_per_row_key = attention_bytes_per_row_key(older)
    assert CpuChampion(shipped, 2048).rows_per_call(1700) == 64
    assert CpuChampion(before, 2048).rows_per_call(1700) == 16
    assert attention_bytes_per_row_key({"config": config, "attention": "gemv"}) == 0  # not the float32 graph


def test_a_verify_call_makes_lists_of_the_rows_the_decision_reads_only(dense):
    """Making a 49,152-float row a list, checking it and taking its argmax costs ~11 ms in Pyodide, where a
    1-row round's champion call takes ~42: the runtime hands over each row's argmax (numpy here,
    row_processing.js's rowArgmax in the page) and a greedy round reads no row, while one with a repetition
    penalty (which can reorder a row) reads the rows up to its first rejection, and takes the same token
    from them. Fails if the runtime makes every row a list up front, if greedy rounds ignore the argmaxes,
    if a penalised round trusts them, or if the two paths disagree."""
    from pyodide_app.champion import RowsOnDemand, VerifyRequest
    from pyodide_app.cpu_champion import CpuChampion
    from pyodide_app.processors import SamplingSettings, argmax
    from pyodide_app.waits import finish

    runtime, _, _ = dense
    made = []
    original = runtime.run

    def counting_run(tokens):
        rows = original(tokens)
        assert isinstance(rows, RowsOnDemand)
        made.append(rows)
        return rows

    champion = CpuChampion(runtime, 256)
    context = (1, 70, 80, 90, 33)
    greedy, penalised = SamplingSettings(temperature=0), SamplingSettings(temperature=0, repetition_penalty=1.3)

    def verify(drafts, settings):
        champion.forget()
        finish(champion.prefill(context[:-1]))
        return finish(champion.verify(VerifyRequest(context, 4, drafts, (None,) * len(drafts), 0, settings)))

    runtime.run = counting_run
    try:
        top = verify((), greedy).terminal
        wrong = (top + 1) % runtime.vocab_size  # the first draft is rejected
        decision = verify((wrong, 5, 6, 7), greedy)
        unread = made[-1]
        penalised_top = verify((), penalised).terminal
        penalised_decision = verify((wrong, 5, 6, 7), penalised)
        read = made[-1]
    finally:
        runtime.run = original
    assert (decision.accepted, decision.terminal) == (0, top)
    assert len(unread) == 5 and unread.made == {}
    runtime.truncate(4)
    expected = runtime.run_array([context[-1]])[0]
    assert unread.best[0] == top == argmax([float(x) for x in expected])
    assert unread[0] == [float(x) for x in expected]
    assert sorted(read.made) == [0] and penalised_decision.terminal == penalised_top
