"""Powered chi-square tests of the speculative output law, per draft-row kind, on the WGSL verify kernel
and on the CPU champion path, with every processor on (see sampled_exactness.py for the design).

Each test states its sample size, the power it has against the wrong implementations it must reject
(computed before sampling from their exactly enumerated laws), its threshold, and the statistic. Every
sampled request must have proposed drafts, accepted some and rejected some, and never fallen back.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from pyodide_app import acceptance, champion, cpu_champion
from pyodide_app.champion import decide
from pyodide_app.gpu_champion import GPUChampion
from pyodide_app.processors import FLOAT, process_row

from . import sampled_exactness as se
from .conftest import ROOT
from .stats import chi_square_statistic

VOCAB = 373  # the synthetic package's vocabulary (checked against the champion below)


def decide_forgetting_drafts(raw_rows, request, ops=FLOAT):
    """A wrong CPU verifier: every row processed at the committed context, ignoring earlier drafts."""
    rows = [process_row(raw, request.settings, request.context, ops) for raw in raw_rows]
    return acceptance.stochastic_decision(
        rows, request.drafts, request.draft_rows, request.draws, request.round_index, len(request.context)
    )


WRONG = {  # name -> (module, attribute, replacement): wrong implementations the test must reject
    "residual_from_p": (champion, "stochastic_decision", se.resampling_decision),
    "accept_min_1_p": (acceptance, "accept_probability", lambda p_y, q_y: min(1, p_y)),
    "penalty_forgets_drafts": (cpu_champion, "decide", decide_forgetting_drafts),
}


@lru_cache(maxsize=None)
def table():
    return se.champion_table(VOCAB, 10)


@lru_cache(maxsize=None)
def plan_for(kind: str) -> se.PoweredPlan:
    """n = the largest of the per-alternative powered sizes (alternatives whose law differs)."""
    expected = se.champion_law(table())
    best = None
    for module, attribute, replacement in WRONG.values():
        original = getattr(module, attribute)
        setattr(module, attribute, replacement)
        try:
            wrong = se.enumerated_law(kind, table(), VOCAB)
        finally:
            setattr(module, attribute, original)
        if sum(abs(wrong.get(c, 0.0) - expected.get(c, 0.0)) for c in set(wrong) | set(expected)) < 1e-9:
            continue  # the same law for this row kind (e.g. min(1, p) == min(1, p/q) when q is a point mass)
        powered = se.powered_plan(expected, wrong)
        if best is None or powered.plan.samples > best.plan.samples:
            best = powered
    return best


@pytest.fixture(scope="module")
def gpu():
    from pyodide_app.native.wgpu_device import WgpuDevice

    return WgpuDevice()


def gpu_champion(gpu, package, negative_control=False) -> GPUChampion:
    manifest = json.loads((package / "manifest.json").read_text())
    champion = GPUChampion(
        gpu,
        manifest,
        lambda n: (package / n).read_bytes(),
        lambda n: (ROOT / "shaders" / f"{n}.wgsl").read_text(),
        k_max=8,
        context_limit=64,
        negative_control=negative_control,
    )
    assert champion.vocab_size == VOCAB
    return champion


@pytest.fixture(scope="module")
def kernel(gpu, synth_package):
    return se.KernelOnTable(gpu_champion(gpu, synth_package), table())


@pytest.fixture(scope="module")
def wrong_kernel(gpu, synth_package):
    return se.KernelOnTable(gpu_champion(gpu, synth_package, negative_control=True), table())


def run_test(champion, kind: str, label: str) -> float:
    powered = plan_for(kind)
    plan = powered.plan
    run = se.sample_outputs(champion, kind, table(), VOCAB, plan.samples)
    statistic = chi_square_statistic(plan, run.counts)
    print(
        f"\n[sampled] {label} {kind}: n={plan.samples} (power {powered.power:.4f} vs the wrong alternatives) "
        f"chi2={statistic:.2f} df={plan.degrees_of_freedom} threshold={plan.threshold:.2f} "
        f"accepted {run.accepted}/{run.proposed}"
    )
    assert not run.fallbacks, f"speculation did not run on every request: {dict(run.fallbacks)}"
    assert 0 < run.accepted < run.proposed  # both branches exercised
    return statistic


@pytest.mark.parametrize("kind", se.KINDS)
def test_the_round_loop_law_equals_the_champion_law_by_enumeration(kind):
    """No sampling: every branch of the real round loop (CPU verifier), float64 probabilities."""
    expected = se.champion_law(table())
    law = se.enumerated_law(kind, table(), VOCAB)
    worst = max(abs(law.get(c, 0.0) - expected.get(c, 0.0)) for c in set(law) | set(expected))
    assert worst < 1e-12


@pytest.mark.parametrize("kind", se.KINDS)
def test_verify_kernel_output_law(kernel, kind):
    assert run_test(kernel, kind, "WGSL verify kernel") <= plan_for(kind).plan.threshold


@pytest.mark.parametrize("kind", se.KINDS)
def test_cpu_champion_output_law(kind):
    assert run_test(se.cpu_champion(table(), VOCAB), kind, "CPU champion") <= plan_for(kind).plan.threshold


@pytest.mark.parametrize("kind", se.KINDS)
def test_the_kernels_negative_control_is_rejected(wrong_kernel, kind):
    """The same test, the device resampling from p after a rejection: must fail."""
    assert run_test(wrong_kernel, kind, "WGSL negative control") > plan_for(kind).plan.threshold


@pytest.mark.parametrize("kind", se.KINDS)
def test_the_cpu_negative_control_is_rejected(monkeypatch, kind):
    plan_for(kind)  # computed with the correct residual first
    monkeypatch.setattr(champion, "stochastic_decision", se.resampling_decision)
    assert run_test(se.cpu_champion(table(), VOCAB), kind, "CPU negative control") > plan_for(kind).plan.threshold


def test_the_table_champion_is_what_decide_sees():
    """Guard for the harness: the CPU path scores exactly the table's rows (no silent filler)."""
    runtime = se.TableRuntime(table(), VOCAB)
    runtime.run(se.PROMPT[:-1])
    rows = runtime.run((se.PROMPT[-1], 20, 21))
    assert rows == [table()[3], table()[4], table()[5]]
    assert decide is cpu_champion.decide
