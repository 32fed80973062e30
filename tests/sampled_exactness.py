"""Powered sampled exactness: the harness behind test_sampled_exactness.py (and the mutation suite).

The champion is a table of raw logits by absolute position (a model whose logits ignore content), so the
champion's law of the first two answer tokens is known in closed form:
    P(x1, x2, x3) = p_0(x1 | prompt) p_1(x2 | prompt + x1) p_2(x3 | prompt + x1 x2),
    p_j = process_row(rows[c + j], settings, history)
with every processor on (repetition penalty, temperature, top-k, top-p). The penalty makes row 1 depend
on the tokens before it, so a verifier that forgets earlier drafts of the same round is wrong there.

Drafts of the three row kinds the product ships, each sampling its token from the q it reports
(Domain.DRAFT_SAMPLE, as the real proposers do):
  full     FullRow over the whole vocabulary (a full-vocabulary neural draft);
  reduced  ReducedRow over 8 ids (the shipped distilled draft's kind: q by id_map);
  point    PointMass on a token with 0 < p < 1 (prompt lookup when the champion may disagree).
Two verifiers run the real round loop (Orchestrator): the WGSL verify kernel on the device (GPUChampion
.verify_logits) and the CPU champion path (CpuChampion over a runtime that returns the table's rows,
acceptance in Python).

Sample sizes come from a power computation: the law a wrong residual ("resample from p", the matching
negative control) produces is computed by exact enumeration of the same round loop in float64, and n is
the smallest multiple of 250 for which Pearson's chi-square test at alpha = 1e-3 rejects that law with
probability >= 0.99 (noncentral chi-square). The threshold is fixed from the expected law before sampling.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from scipy.stats import ncx2

from pyodide_app import acceptance, champion
from pyodide_app.acceptance import Decision, FullRow, PointMass, ReducedRow
from pyodide_app.cpu_champion import CpuChampion
from pyodide_app.orchestrator import Emitted, Finished, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings, process_row
from pyodide_app.proposers.base import Proposal
from pyodide_app.rng import Domain
from pyodide_app.sampling import SeededDraws

from .enumeration import FloatScriptedDraws, output_distribution
from .stats import ChiSquarePlan, plan_chi_square

ALPHA = 1e-3
POWER = 0.99
HORIZON = 3  # answer tokens per sample
K = 2  # drafts per round: row 1 of a verify call is used whenever d_1 is accepted, the bonus (row 2) as token 3
PROMPT = (1, 5, 9, 5)  # 5 is in the prompt: penalised in every row
SETTINGS = SamplingSettings(temperature=0.8, top_k=5, top_p=0.9, repetition_penalty=1.5)
KINDS = ("full", "reduced", "point")
MASKED = -200.0  # far below the support: probability 0 in f32 (flushed on the device), ~1e-87 in Python
REDUCED_IDS = (2, 20, 21, 22, 23, 30, 31, 40)


def champion_table(vocab: int, positions: int) -> dict[int, list[float]]:
    """Raw logits at positions 3.. (c = len(PROMPT) - 1 is the first scored position). Tokens 20-22,
    the drafts' favourites, have large positive logits, so penalising them after they were drafted
    earlier in the round changes the next row a lot."""
    rng = random.Random(7)
    table = {}
    for position in range(len(PROMPT) - 1, len(PROMPT) - 1 + positions):
        row = [MASKED] * vocab
        for token, logit in zip((5, 20, 21, 22, 23, 24), (1.0, 2.2, 2.0, 1.7, 0.5, 0.0)):
            row[token] = logit + rng.uniform(-0.3, 0.3)
        table[position] = row
    return table


def draft_row(kind: str, position: int, vocab: int, table: dict[int, list[float]]):
    """q for the token at `position` (dyadic masses: exact in f32 and f64, so both verifiers see the same q)."""
    shift = position % 3
    if kind == "full":
        probs = [0.0] * vocab
        for token, mass in zip((20, 21, 22, 23, 30), (0.375, 0.25, 0.125, 0.125, 0.125)):
            probs[(token + shift) if token != 30 else 30] = mass
        return FullRow(probs)
    if kind == "reduced":
        masses = [0.0625, 0.25, 0.25, 0.125, 0.125, 0.0625, 0.0625, 0.0625]
        return ReducedRow(REDUCED_IDS, masses[shift:] + masses[:shift])  # rows differ: a wrong stride shows
    # the champion's second most likely token at this position: p in (0, 1), never a sure accept
    row = table[position]
    second = sorted(range(vocab), key=lambda t: (-row[t], t))[1]
    return PointMass(second)


class TableDraft:
    """A proposer that samples each token from the q row it reports (what every real draft must do)."""

    def __init__(self, kind: str, vocab: int, table: dict[int, list[float]]):
        self.name, self.kind, self.vocab, self.table = kind, kind, vocab, table

    def propose(self, context: Sequence[int], k: int, round_index: int, draws) -> Proposal:
        tokens, rows = [], []
        for i in range(k):
            row = draft_row(self.kind, len(context) - 1 + i, self.vocab, self.table)
            if isinstance(row, PointMass):
                token = row.token
            else:
                token = draws.categorical(Domain.DRAFT_SAMPLE, round_index, i, row.dense(self.vocab))
            tokens.append(token)
            rows.append(row)
        return Proposal(tuple(tokens), tuple(rows))

    def reset(self) -> None:
        pass


class TableRuntime:
    """ChampionRuntime (cpu_champion.py) whose logits rows come from the table by position."""

    def __init__(self, table: dict[int, list[float]], vocab: int):
        self.table, self.vocab_size, self.cached = table, vocab, []

    def truncate(self, length: int) -> None:
        del self.cached[length:]

    def run(self, tokens: Sequence[int]) -> list[list[float]]:
        start = len(self.cached)
        self.cached.extend(tokens)
        filler = [0.0] * self.vocab_size  # prompt rows: prefill discards their logits
        return [self.table.get(start + i, filler) for i in range(len(tokens))]


class KernelOnTable:
    """Champion whose verify runs the device's verify kernel on the table's rows."""

    def __init__(self, gpu_champion, table: dict[int, list[float]], context_limit: int = 64):
        self.gpu, self.table = gpu_champion, table
        self.vocab_size, self.context_limit = gpu_champion.vocab_size, context_limit
        self.calls, self.wait_seconds = 0, 0.0

    def prefill(self, tokens) -> None:
        pass

    def forget(self) -> None:
        pass

    def cached_rows(self, tokens) -> int:
        return 0

    def memory_bytes(self) -> dict[str, int]:
        return self.gpu.memory_bytes()

    def verify(self, request):
        rows = [self.table[request.committed_kv + j] for j in range(request.rows)]
        return self.gpu.verify_logits(rows, request)


def cpu_champion(table: dict[int, list[float]], vocab: int) -> CpuChampion:
    return CpuChampion(TableRuntime(table, vocab), context_limit=64)


def champion_law(table: dict[int, list[float]], settings: SamplingSettings = SETTINGS) -> dict[tuple, float]:
    """P(x_1..x_HORIZON) by the chain rule of processed rows: the law every verifier must produce."""
    c = len(PROMPT) - 1
    law = {(): 1.0}
    for j in range(HORIZON):
        grown = {}
        for prefix, mass in law.items():
            row = process_row(table[c + j], settings, PROMPT + prefix)
            grown.update({prefix + (x,): mass * p for x, p in enumerate(row) if p > 0})
        law = grown
    return law


def full_target_residual(target_row, draft_row):
    """The wrong residual of the negative control: resample from p itself after a rejection."""
    total = math.fsum(target_row)
    return [p / total for p in target_row]


def resampling_decision(target_rows, drafts, draft_rows, draws, round_index, token_index):
    """The negative control's verifier for every row kind: the textbook accept test, then after a rejection a
    fresh sample of p itself (for a point mass: possibly the rejected token again, which the coupled rule's
    correction never is)."""
    for i, token in enumerate(drafts):
        p_row = target_rows[i]
        accept = acceptance.accept_probability(p_row[token], draft_rows[i].prob(token))
        if draws.bernoulli(Domain.ACCEPT_UNIFORM, round_index, i, accept):
            continue
        return Decision(i, draws.categorical(Domain.CORRECTION_SAMPLE, round_index, i, p_row), "correction")
    k = len(drafts)
    terminal = draws.categorical(Domain.TOKEN_SAMPLE, token_index + k, 0, target_rows[k])
    return Decision(k, terminal, "bonus" if k else "sample")


def enumerated_law(kind: str, table, vocab: int, wrong_residual: bool = False) -> dict[tuple, float]:
    """The law of the first HORIZON tokens of the real round loop (CPU verifier), by exact enumeration of
    its branches with float probabilities; with wrong_residual, the negative control's law."""
    orchestrator = Orchestrator(
        cpu_champion(table, vocab),
        TableDraft(kind, vocab, table),
        GenerationConfig(max_new_tokens=HORIZON, k=K, settings=SETTINGS),
        lambda t: b"x",
    )
    original = champion.stochastic_decision
    if wrong_residual:
        champion.stochastic_decision = resampling_decision
    try:
        return output_distribution(orchestrator, orchestrator.proposer, PROMPT, FloatScriptedDraws)
    finally:
        champion.stochastic_decision = original


def power(plan: ChiSquarePlan, wrong: dict[tuple, float]) -> float:
    """P(statistic > threshold) when outcomes follow `wrong` (noncentral chi-square approximation)."""
    cells = list(plan.cells)
    wrong_cells = [wrong.get(c, 0.0) for c in cells]
    if len(plan.probabilities) > len(cells):
        wrong_cells.append(1.0 - sum(wrong_cells))
    noncentrality = plan.samples * sum((w - p) ** 2 / p for w, p in zip(wrong_cells, plan.probabilities))
    return float(ncx2.sf(plan.threshold, plan.degrees_of_freedom, noncentrality))


@dataclass(frozen=True)
class PoweredPlan:
    plan: ChiSquarePlan
    power: float  # against the wrong-residual law
    wrong: dict


def powered_plan(expected: dict, wrong: dict, step: int = 250, most: int = 20_000) -> PoweredPlan:
    """The smallest n (a multiple of `step`) whose test rejects `wrong` with probability >= POWER."""
    for samples in range(step, most + 1, step):
        plan = plan_chi_square(expected, samples, ALPHA)
        achieved = power(plan, wrong)
        if achieved >= POWER:
            return PoweredPlan(plan, achieved, wrong)
    raise AssertionError(f"no n <= {most} reaches power {POWER} against the wrong residual")


@dataclass
class SampleRun:
    counts: Counter
    proposed: int
    accepted: int
    fallbacks: Counter  # fallback / error codes seen (must stay empty)


def sample_outputs(champion, kind: str, table, vocab: int, samples: int, base_seed: int = 10_000) -> SampleRun:
    """`samples` seeded requests through the real round loop; the first HORIZON tokens of each."""
    proposer = TableDraft(kind, vocab, table)
    run = SampleRun(Counter(), 0, 0, Counter())
    for i in range(samples):
        config = GenerationConfig(max_new_tokens=HORIZON, k=K, settings=SETTINGS, seed=base_seed + i)
        orchestrator = Orchestrator(champion, proposer, config, lambda t: b"x", draws=SeededDraws(base_seed + i))
        events = list(orchestrator.generate(PROMPT))
        finished = events[-1]
        assert isinstance(finished, Finished)
        stats = finished.stats
        for code in (stats.fallback_code, stats.error_code):
            if code is not None:
                run.fallbacks[code] += 1
        if stats.draft_failures:
            run.fallbacks["draft_failures"] += stats.draft_failures
        run.proposed += stats.proposed
        run.accepted += stats.accepted
        run.counts[tuple(t for e in events if isinstance(e, Emitted) for t in e.tokens)[:HORIZON]] += 1
    return run
