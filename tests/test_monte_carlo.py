"""Seeded Monte Carlo through the real round loop with Philox draws, float arithmetic.

Each sample is one whole request (seed = base + i) whose output over a short
horizon is counted. A Pearson chi-square test against the champion's joint
(the chain-rule product of processed target rows) uses a threshold fixed
from the expected law before sampling (alpha = 1e-3). The negative control,
resampling from the full target after a rejection, must exceed it.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

from pyodide_app import acceptance
from pyodide_app.champion import ReferenceChampion
from pyodide_app.orchestrator import Emitted, Finished, GenerationConfig, Orchestrator
from pyodide_app.processors import FLOAT, SamplingSettings
from pyodide_app.proposers import ModelDraft, PromptLookup
from pyodide_app.sampling import SeededDraws
from pyodide_app.table_model import TableModel

from .enumeration import chain_rule_joint
from .stats import chi_square_statistic, plan_chi_square

ALPHA = 1e-3
SAMPLES = 50_000
PROMPT = (0, 1, 2, 0)


def full_context_model(vocab: int, horizon: int, seed: int, spread: float) -> TableModel:
    """Float logits uniform in [-spread, spread] for every context up to the horizon."""
    rng = random.Random(seed)
    rows = {(): [0.0] * vocab}
    for length in range(horizon):
        for suffix in itertools.product(range(vocab), repeat=length):
            rows[PROMPT + suffix] = [rng.uniform(-spread, spread) for _ in range(vocab)]
    return TableModel(vocab, rows)


def sample_outputs(orchestrator: Orchestrator, samples: int, base_seed: int) -> Counter:
    counts = Counter()
    for i in range(samples):
        orchestrator.draws = SeededDraws(base_seed + i)
        events = list(orchestrator.generate(PROMPT))
        assert isinstance(events[-1], Finished) and events[-1].reason == "length"
        counts[sum((e.tokens for e in events if isinstance(e, Emitted)), ())] += 1
    return counts


def run_case(target_settings, draft_settings, proposer_kind: str, k: int, vocab: int, seed: int):
    horizon = 3
    target = full_context_model(vocab, horizon, seed, spread=1.5)
    draft = full_context_model(vocab, horizon, seed + 1, spread=2.5)
    config = GenerationConfig(max_new_tokens=horizon, k=k, settings=target_settings)
    proposer = PromptLookup(n_max=2) if proposer_kind == "prompt_lookup" else ModelDraft(draft, draft_settings)
    orchestrator = Orchestrator(ReferenceChampion(target), proposer, config, lambda t: bytes([65 + t]))
    expected = chain_rule_joint(target, target_settings, PROMPT, horizon, frozenset(), FLOAT)
    assert math.isclose(sum(expected.values()), 1.0, rel_tol=1e-12)
    plan = plan_chi_square(expected, SAMPLES, ALPHA)  # threshold fixed before any sample is drawn
    return orchestrator, plan


CASES = {
    "draft_T1_k2": (SamplingSettings(), SamplingSettings(), "draft", 2, 3),
    "processors_k3": (
        SamplingSettings(temperature=0.7, top_p=0.9, top_k=3, repetition_penalty=1.3),
        SamplingSettings(temperature=1.4, top_k=3),
        "draft",
        3,
        4,
    ),
    "prompt_lookup_k2": (SamplingSettings(), SamplingSettings(), "prompt_lookup", 2, 3),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_speculative_output_passes_chi_square(name):
    target_settings, draft_settings, kind, k, vocab = CASES[name]
    orchestrator, plan = run_case(target_settings, draft_settings, kind, k, vocab, seed=11)
    statistic = chi_square_statistic(plan, sample_outputs(orchestrator, SAMPLES, base_seed=1_000))
    print(f"{name}: chi2={statistic:.2f} df={plan.degrees_of_freedom} threshold={plan.threshold:.2f} n={SAMPLES}")
    assert statistic <= plan.threshold
    assert orchestrator.stats.champion_calls >= 1


def _full_target_resample(target_row, draft_row):
    total = math.fsum(target_row)
    return [p / total for p in target_row]


@pytest.mark.slow
def test_negative_control_fails_chi_square(monkeypatch):
    target_settings, draft_settings, kind, k, vocab = CASES["draft_T1_k2"]
    orchestrator, plan = run_case(target_settings, draft_settings, kind, k, vocab, seed=11)
    monkeypatch.setattr(acceptance, "positive_residual", _full_target_resample)
    statistic = chi_square_statistic(plan, sample_outputs(orchestrator, SAMPLES, base_seed=1_000))
    print(
        f"negative control: chi2={statistic:.2f} df={plan.degrees_of_freedom} threshold={plan.threshold:.2f} "
        f"n={SAMPLES}"
    )
    assert statistic > plan.threshold
