"""The shipped distilled draft at T > 0 (neural and hybrid proposers) keeps the champion's law.

Champion: SmolLM2's own logits after a real chat prompt (row c, from the WGSL champion), as a
position-indexed table (sampled_exactness.KernelOnTable / TableRuntime). Draft: the shipped draft.onnx on
onnxruntime through the real NeuralProposer — reduced-vocabulary q rows (8,192 ids), sampled on its graph.
Statistic: the first output token, whose law must be p_0 = process_row(row c) whatever the draft does.

Power, computed before sampling: with the wrong residual (resample from p after a rejection) the first
token's law is exactly P'(x) = min(p_0, q)(x) + (1 - beta) p_0(x), beta = sum min(p_0, q), where q is the
draft's first row at the prompt (a function of the context alone, not of the round's randomness). n is the
smallest multiple of 250 giving power >= 0.99 at alpha = 1e-3. The CPU path's negative control (the same
test with the wrong residual) must be rejected.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from pyodide_app import acceptance
from pyodide_app.chat_template import ChatTemplate
from pyodide_app.gpu_champion import GPUChampion
from pyodide_app.native.onnx_draft import OnnxDraftRuntime
from pyodide_app.orchestrator import Emitted, Finished, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings, process_row
from pyodide_app.proposers import HybridProposer, NeuralProposer
from pyodide_app.sampling import SeededDraws
from pyodide_app.tokenizer import Tokenizer
from pyodide_app.waits import finish

from . import sampled_exactness as se
from .conftest import ROOT
from .stats import chi_square_statistic

SETTINGS = SamplingSettings(temperature=0.7, top_k=20, repetition_penalty=1.1)
PROMPT = "Give me one tip for sleeping better."


@pytest.fixture(scope="module")
def real(real_package):
    """(manifest, prompt ids, the champion's row after the prompt, a WGSL champion, the draft runtime)."""
    from pyodide_app.native.wgpu_device import WgpuDevice

    manifest = json.loads((real_package / "manifest.json").read_text())
    tokenizer = Tokenizer.from_json((real_package / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((real_package / manifest["chat_template"]).read_text())
    prompt = tuple(tokenizer.encode(template.render([{"role": "user", "content": PROMPT}])))
    champion = GPUChampion(
        WgpuDevice(),
        manifest,
        lambda n: (real_package / n).read_bytes(),
        lambda n: (ROOT / "shaders" / f"{n}.wgsl").read_text(),
        k_max=8,
        context_limit=256,
    )
    champion.prefill(prompt[:-1])
    champion.forward([prompt[-1]], len(prompt) - 1)
    row = [float(x) for x in champion.read_logits(1)[0]]
    runtime = OnnxDraftRuntime(real_package / manifest["draft"]["onnx"], manifest["draft"])
    return prompt, row, champion, runtime


def make_proposer(kind: str, runtime):
    neural = NeuralProposer(runtime, SETTINGS.temperature)
    return neural if kind == "neural" else HybridProposer(neural)


@lru_cache(maxsize=None)
def laws(prompt: tuple, row: tuple, q_first: tuple) -> tuple[dict, dict]:
    p0 = process_row(list(row), SETTINGS, prompt)
    expected = {(t,): p for t, p in enumerate(p0) if p > 0}
    beta = sum(min(p, q) for p, q in zip(p0, q_first))
    wrong = {}
    for t, (p, q) in enumerate(zip(p0, q_first)):
        mass = min(p, q) + (1 - beta) * p
        if mass > 0:
            wrong[(t,)] = mass
    return expected, wrong


def first_row(proposer, prompt, vocab: int) -> tuple:
    """q of the first draft position at the prompt (the same for every seed: only the token is random)."""
    return tuple(float(x) for x in finish(proposer.propose(prompt, 1, 0, SeededDraws(0))).rows[0].dense(vocab))


def sample_first_tokens(champion, proposer, prompt, samples: int) -> tuple[dict, int, int]:
    counts, proposed, accepted = {}, 0, 0
    for i in range(samples):
        config = GenerationConfig(max_new_tokens=1, k=1, settings=SETTINGS, seed=50_000 + i)
        events = list(
            Orchestrator(champion, proposer, config, lambda t: b"x", draws=SeededDraws(50_000 + i)).generate(prompt)
        )
        finished = events[-1]
        assert isinstance(finished, Finished)
        stats = finished.stats
        assert stats.fallback_code is None and stats.error_code is None and stats.draft_failures == 0, stats
        proposed += stats.proposed
        accepted += stats.accepted
        key = tuple(t for e in events if isinstance(e, Emitted) for t in e.tokens)
        counts[key] = counts.get(key, 0) + 1
    return counts, proposed, accepted


# hybrid drafts with the neural draft here (the prompt's tail has no earlier 2-gram match): once, on the device
@pytest.mark.parametrize(
    "kind, verifier", [("neural", "wgsl"), ("neural", "cpu"), ("neural", "cpu_wrong_residual"), ("hybrid", "wgsl")]
)
def test_the_shipped_draft_keeps_the_champion_law(real, monkeypatch, kind, verifier):
    prompt, row, gpu_champion, runtime = real
    vocab = gpu_champion.vocab_size
    table = {len(prompt) - 1: row, len(prompt): row}  # row c scores the first token; row c+1 (bonus) is not observed
    proposer = make_proposer(kind, runtime)
    q_first = first_row(proposer, prompt, vocab)
    expected, wrong = laws(prompt, tuple(row), q_first)
    plan = se.powered_plan(expected, wrong)
    champion = (
        se.KernelOnTable(gpu_champion, table, context_limit=256)
        if verifier == "wgsl"
        else se.cpu_champion(table, vocab)
    )
    if verifier == "cpu_wrong_residual":
        monkeypatch.setattr(acceptance, "positive_residual", se.full_target_residual)
    counts, proposed, accepted = sample_first_tokens(champion, proposer, prompt, plan.plan.samples)
    statistic = chi_square_statistic(plan.plan, counts)
    tv = sum(abs(wrong.get(c, 0.0) - expected.get(c, 0.0)) for c in set(wrong) | set(expected)) / 2
    print(
        f"\n[real draft] {kind} on {verifier}: n={plan.plan.samples} (power {plan.power:.4f} vs the wrong residual, "
        f"TV {tv:.3f}) chi2={statistic:.2f} df={plan.plan.degrees_of_freedom} threshold={plan.plan.threshold:.2f} "
        f"accepted {accepted}/{proposed}"
    )
    assert proposed == plan.plan.samples and 0 < accepted < proposed  # the draft ran every time, both branches
    if verifier == "cpu_wrong_residual":
        assert statistic > plan.plan.threshold
    else:
        assert statistic <= plan.plan.threshold


def test_the_first_row_is_a_reduced_row_of_the_shipped_draft(real):
    prompt, _, gpu_champion, runtime = real
    row = finish(make_proposer("neural", runtime).propose(prompt, 1, 0, SeededDraws(0))).rows[0]
    assert isinstance(row, acceptance.ReducedRow) and len(row.ids) == 12288  # the shipped draft's output vocabulary
    assert float(np.sum(np.asarray(row.probs, np.float64))) == 1.0  # the exact 2^-24-grid q
