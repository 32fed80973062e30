"""The exactness self-test (pyodide_app/self_test.py) on each champion the app runs, and the negative
controls that must make each of its checks fail: a matmul whose result depends on the number of rows, a
verifier that resamples from the target, a recorded golden token or Philox word that the device does not
reproduce, a package without recorded values."""

from __future__ import annotations

import copy
import json

import pytest

from build_tools.golden import RANDOM123_KNOWN_ANSWERS
from pyodide_app.gpu_champion import KERNEL_FAMILIES, GPUChampion
from pyodide_app.native.loader import load_engine
from pyodide_app.self_test import CHECKS, run_self_test
from pyodide_app.waits import finish

from .conftest import ROOT

SHADERS = ROOT / "shaders"
K_MAX = 4
# A matmul store scaled by 1 + (T - 1) * 2^-20: row t's result then depends on how many rows the call has.
STORES = {f: f"y[at] = select({v}, y[at] + {v}, ACCUMULATE)" for f, v in (("columns", "value"), ("split", "sum"))}
ROW_DEPENDENT = " * (1.0 + f32(params.rows - 1u) / 1048576.0)"


@pytest.fixture(scope="module")
def gpu():
    wgpu_device = pytest.importorskip("pyodide_app.native.wgpu_device")
    return wgpu_device.WgpuDevice()


@pytest.fixture(scope="module")
def golden(synth_package):
    return json.loads((synth_package / "golden.json").read_text())


def gpu_champion(gpu, package, kernels="columns", negative_control=False, perturb=None) -> GPUChampion:
    def shader_source(name):
        source = (SHADERS / f"{name}.wgsl").read_text()
        return perturb(name, source) if perturb else source

    return GPUChampion(
        gpu,
        json.loads((package / "manifest.json").read_text()),
        lambda name: (package / name).read_bytes(),
        shader_source,
        k_max=K_MAX,
        context_limit=128,
        kernels=kernels,
        negative_control=negative_control,
    )


def outcome(report: dict) -> dict[str, bool]:
    assert [c["name"] for c in report["checks"]] == list(CHECKS)
    return {c["name"]: c["passed"] for c in report["checks"]}


@pytest.mark.parametrize("family", KERNEL_FAMILIES)
def test_every_check_passes_on_the_gpu_champion(gpu, synth_package, golden, family):
    champion = gpu_champion(gpu, synth_package, family)
    report = finish(run_self_test(champion, golden, K_MAX + 1))
    print(f"\n[self-test] {family}: {[(c['name'], c['detail']) for c in report['checks']]}")
    assert report["passed"], report
    assert len(champion.kv) == 0  # forgotten afterwards


def test_every_check_passes_on_the_float32_cpu_champion(synth_package):
    report = finish(load_engine(synth_package, k_max=K_MAX, backend="cpu").self_test())
    print(f"\n[self-test] cpu: {[(c['name'], c['detail']) for c in report['checks']]}")
    assert report["passed"], report


def test_the_compact_cpu_champion_is_reported_not_batch_invariant(synth_package):
    """MatMulNBits gives a row other last bits in a 5-row call than alone (docs/ARCHITECTURE.md): the self-test
    says so on that path instead of claiming what does not hold there."""
    report = finish(load_engine(synth_package, k_max=K_MAX, backend="cpu-compact").self_test())
    expected = {"batch_invariance": False, "golden_greedy": True, "philox": True, "verify_fixtures": True}
    assert outcome(report) == expected


@pytest.mark.parametrize("family", KERNEL_FAMILIES)
def test_a_matmul_that_depends_on_the_row_count_fails_batch_invariance(gpu, synth_package, golden, family):
    def perturb(name, source):
        if name != f"matmul_{family}":
            return source
        assert STORES[family] in source
        return source.replace(STORES[family], STORES[family] + ROW_DEPENDENT)

    report = finish(run_self_test(gpu_champion(gpu, synth_package, family, perturb=perturb), golden, K_MAX + 1))
    checks = outcome(report)
    assert not report["passed"] and not checks["batch_invariance"]
    assert checks["philox"] and checks["verify_fixtures"]  # kernels other than the matmul are untouched


def test_a_verifier_that_resamples_from_the_target_fails_the_fixtures(gpu, synth_package, golden):
    report = finish(run_self_test(gpu_champion(gpu, synth_package, negative_control=True), golden, K_MAX + 1))
    checks = outcome(report)
    assert not checks["verify_fixtures"]
    assert checks["batch_invariance"] and checks["golden_greedy"] and checks["philox"]
    failed = next(c for c in report["checks"] if c["name"] == "verify_fixtures")
    assert "expected" in failed["detail"] and "got" in failed["detail"]


def test_recorded_values_the_device_does_not_reproduce_fail_their_check(gpu, synth_package, golden):
    champion = gpu_champion(gpu, synth_package)
    wrong = copy.deepcopy(golden)
    case = wrong["cases"][1]
    case["greedy"][3] = (case["greedy"][3] + 1) % champion.vocab_size
    wrong["philox"][-1]["words"][2] ^= 1
    report = finish(run_self_test(champion, wrong, K_MAX + 1))
    checks = outcome(report)
    assert checks == {"batch_invariance": True, "golden_greedy": False, "philox": False, "verify_fixtures": True}
    details = {c["name"]: c["detail"] for c in report["checks"]}
    assert details["golden_greedy"].startswith("prompt 2, token 4:")
    assert details["philox"].startswith(f"case {len(wrong['philox'])}:")


def test_a_package_without_recorded_values_fails_and_says_so(gpu, synth_package, golden):
    champion = gpu_champion(gpu, synth_package)
    report = finish(run_self_test(champion, {"cases": golden["cases"]}, K_MAX + 1))
    expected = {"batch_invariance": True, "golden_greedy": True, "philox": False, "verify_fixtures": False}
    assert outcome(report) == expected
    assert all("rebuild" in c["detail"] for c in report["checks"] if not c["passed"])
    assert not finish(run_self_test(champion, None, K_MAX + 1))["passed"]


def test_the_package_records_the_published_philox_answers_and_every_decision_kind(golden):
    recorded = {(tuple(c["counter"]), tuple(c["key"])): tuple(c["words"]) for c in golden["philox"]}
    for counter, key, words in RANDOM123_KNOWN_ANSWERS:
        assert recorded[(counter, key)] == words
    kinds = {case["expected"]["kind"] for case in golden["verify"]}
    assert kinds == {"sample", "bonus", "correction"}
    corrections = [c for c in golden["verify"] if c["expected"]["kind"] == "correction" and c["q"] == "point"]
    assert len(corrections) >= 4  # each would differ under a verifier that resamples from the target with p ~ 1/2
