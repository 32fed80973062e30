"""The draft graph samples exactly from the q it reports (export_onnx.add_sampler).

Speculative decoding is exact only if the draft's token is distributed as the q row the verifier
divides by. The graph draws its token itself (inverse CDF at a Philox uniform u = j / 2^24), so for
every legal u its token must equal `categorical_from_uniform(q, u)` — the Python inverse CDF of the
reported q — on native onnxruntime and on onnxruntime-web (the browser's runtime). Its entropy_bits
output is H(softmax(logits / T)) (T = 1 at temperature 0) on both.

Checked for the shipped distilled draft (reduced vocabulary, 8,192 ids) and the synthetic package's
draft (full vocabulary): the whole graph at the extreme uniforms, and the graph's own sampler nodes
(extracted from the file) at thousands of uniforms per row, including both ends of the u-interval of
hundreds of tokens, on rows from the model and on adversarial rows (flat, peaked, greedy).
Bug it catches: the old `CumSum(probs) >= u * ReduceSum(probs)` sampler, whose f32 cumulative sum fell
short of the total so that u near 1 returned index 0 (EOS in the shipped draft).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from build_tools.export_onnx import GRID
from pyodide_app.sampling import categorical_from_uniform

from .conftest import ROOT
from .test_reference_and_onnx import empty_past, run_in_onnxruntime_web

SHIPPED = ROOT / "build_tools" / "drafts" / "smollm2-135m-distilled"
EXTREME = [2.0**-24, 1 - 2.0**-24, 1 - 64 * 2.0**-24, 1.0, 0.5]
TEMPERATURES = [0.7, 1.0, 0.3, 0.0]


def draft_files(which: str, synth_package: Path) -> tuple[Path, np.ndarray | None, dict, list[int]]:
    if which == "shipped":
        entry = json.loads((SHIPPED / "draft.json").read_text())
        prompt = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11, 2, 198, 1, 4093, 198, 504, 3458, 282, 4649, 314]
        return SHIPPED / "draft.onnx", np.asarray(entry["id_map"], np.int64), entry["config"], prompt
    entry = json.loads((synth_package / "manifest.json").read_text())["draft"]
    id_map = None if entry.get("id_map") is None else np.asarray(entry["id_map"], np.int64)
    return synth_package / "draft.onnx", id_map, entry["config"], [1, 70, 80, 90, 33]


def expected_token(q: np.ndarray, u: float, id_map) -> int:
    index = categorical_from_uniform(list(q.astype(np.float64)), float(np.float32(u)))
    return int(index if id_map is None else id_map[index])


def entropy_of(logits: np.ndarray, temperature: float) -> float:
    """H(softmax(logits / T)) in bits, in float64."""
    scaled = logits.astype(np.float64) / temperature
    p = np.exp(scaled - scaled.max())
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum())


def check_q(q: np.ndarray) -> None:
    """q is on the 2^-24 grid and sums to exactly 1: its law under u = j / 2^24 is q itself."""
    counts = q.astype(np.float64) * GRID
    assert np.array_equal(counts, np.round(counts)) and counts.min() >= 0
    assert int(counts.sum()) == GRID


def uniforms_for(q: np.ndarray, rng: random.Random, random_count: int, boundary_tokens: int) -> list[float]:
    """Extremes, random grid points, and both ends (j = cdf_{i-1} + 1 and j = cdf_i) of the
    u-interval of the most likely tokens and of random positive ones."""
    counts = np.round(q.astype(np.float64) * GRID).astype(np.int64)
    cdf = np.cumsum(counts)
    positive = [int(i) for i in np.flatnonzero(counts)]
    chosen = sorted(positive, key=lambda i: -counts[i])[: boundary_tokens // 2]
    chosen += rng.sample(positive, min(len(positive), boundary_tokens // 2))
    js = {int(cdf[i]) for i in chosen} | {int(cdf[i] - counts[i] + 1) for i in chosen}
    js |= {rng.randrange(1, GRID + 1) for _ in range(random_count)}
    return EXTREME + [j / GRID for j in sorted(js)]


def model_rows(path: Path, config: dict, prompt: list[int]) -> list[np.ndarray]:
    """Logits of two positions from the graph itself, plus adversarial rows of the same width."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {
        "input_ids": np.array([prompt], np.int64),
        "temperature": np.array([1.0], np.float32),
        "uniform": np.array([0.5], np.float32),
        **empty_past(config),
    }
    names = [o.name for o in session.get_outputs()]
    first = dict(zip(names, session.run(None, feeds)))["logits"][0]
    feeds["input_ids"] = np.array([prompt[:-3]], np.int64)
    second = dict(zip(names, session.run(None, feeds)))["logits"][0]
    width = first.shape[0]
    flat = np.zeros(width, np.float32)  # every token equally likely: the largest floor shortfall
    peaked = np.full(width, -30.0, np.float32)
    peaked[width // 3] = 10.0
    return [first, second, flat, peaked]


@pytest.fixture(scope="module")
def samplers(tmp_path_factory, synth_package):
    """which -> (full graph, sampler-only graph extracted from the same file, id_map, config, prompt),
    built on first use (the mutation suite runs only the synthetic cases, without the shipped file)."""
    cache = {}

    def get(which: str):
        if which not in cache:
            path, id_map, config, prompt = draft_files(which, synth_package)
            sampler = tmp_path_factory.mktemp("sampler") / f"{which}.onnx"
            onnx.utils.extract_model(str(path), str(sampler), ["logits", "temperature", "uniform"], ["probs", "token"])
            cache[which] = (path, sampler, id_map, config, prompt)
        return cache[which]

    return get


@pytest.mark.parametrize("which", ["shipped", "synthetic"])
def test_the_whole_graph_samples_its_reported_q_at_extreme_uniforms(samplers, which):
    path, _, id_map, config, prompt = samplers(which)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    runs = [{"temperature": t, "uniform": u} for t in TEMPERATURES for u in EXTREME]
    feeds = {"input_ids": np.array([prompt], np.int64), **empty_past(config)}
    web = run_in_onnxruntime_web(path, feeds, runs, ["probs", "token", "entropy_bits"])
    for run, web_out in zip(runs, web):
        native = dict(
            zip(
                names,
                session.run(
                    None,
                    {
                        **feeds,
                        "temperature": np.array([run["temperature"]], np.float32),
                        "uniform": np.array([run["uniform"]], np.float32),
                    },
                ),
            )
        )
        q = native["probs"][0]
        check_q(q)
        assert int(native["token"][0]) == expected_token(q, run["uniform"], id_map), f"native {run}"
        web_q = np.asarray(web_out["probs"], np.float32)  # its own q: wasm logits differ in the last bits
        check_q(web_q)
        assert web_out["token"] == [expected_token(web_q, run["uniform"], id_map)], f"web {run}"
        # The row's entropy the neural proposer's stop reads: of softmax(logits / T), T = 1 when greedy.
        bits = entropy_of(native["logits"][0], run["temperature"] or 1.0)
        assert native["entropy_bits"][0] == pytest.approx(bits, rel=1e-4, abs=1e-4), f"native {run}"
        assert web_out["entropy_bits"][0] == pytest.approx(bits, rel=1e-3, abs=1e-3), f"web {run}"


@pytest.mark.parametrize("which", ["shipped", "synthetic"])
def test_the_graphs_sampler_is_the_inverse_cdf_of_its_q_at_thousands_of_uniforms(samplers, which):
    path, sampler, id_map, config, prompt = samplers(which)
    session = ort.InferenceSession(str(sampler), providers=["CPUExecutionProvider"])
    rng = random.Random(which)
    checked = 0
    for r, logits in enumerate(model_rows(path, config, prompt)):
        for temperature in TEMPERATURES:
            feeds = {"logits": logits[None, :], "temperature": np.array([temperature], np.float32)}
            q = session.run(["probs"], {**feeds, "uniform": np.array([0.5], np.float32)})[0][0]
            check_q(q)
            uniforms = uniforms_for(q, rng, random_count=1500, boundary_tokens=300)
            for u in uniforms:
                token = int(session.run(["token"], {**feeds, "uniform": np.array([u], np.float32)})[0][0])
                assert token == expected_token(q, u, id_map), f"row {r}, T={temperature}, u={u!r}"
            checked += len(uniforms)
            if r == 0 and temperature == 0.7:  # the same row and uniforms in onnxruntime-web
                web = run_in_onnxruntime_web(
                    sampler, feeds, [{"uniform": u} for u in uniforms], ["probs", "token"], ["probs"]
                )
                web_q = np.asarray(web[0]["probs"], np.float32)  # wasm's softmax differs in the last bits
                check_q(web_q)
                assert [w["token"][0] for w in web] == [expected_token(web_q, u, id_map) for u in uniforms]
    print(f"\n[sampler] {which}: {checked} (row, T, u) triples; graph token == inverse CDF of its own q at every one")
