"""Exhaustive exactness: the speculative joint equals the champion's joint, in exact rationals.

Every fixture: vocabulary V in 2..4, k in 1..3, horizon k + 1 output tokens.
Target and draft are table models keyed by the full context, with weights
w = exp(logit) drawn from fourth powers of rationals (so temperature 2 and
repetition penalty 2 stay rational). Each branch of the real round loop is
enumerated (tests/enumeration.py); the resulting P(output) must equal:
  (a) the champion-alone joint through the same loop (k = 0), and
  (b) the direct chain-rule product of processed target rows.
The negative control (resample from the full target after a rejection) must
give a different joint on fixtures where the residual differs from p.
"""

from __future__ import annotations

import itertools
import random
import zlib
from dataclasses import dataclass
from fractions import Fraction

import pytest

from pyodide_app import acceptance
from pyodide_app.champion import ReferenceChampion
from pyodide_app.orchestrator import GenerationConfig, Orchestrator
from pyodide_app.processors import EXACT, SamplingSettings, process_row
from pyodide_app.proposers import HybridProposer, ModelDraft, NoProposer, PromptLookup
from pyodide_app.proposers.auto import AutoProposer
from pyodide_app.proposers.model_draft import entropy_bits
from pyodide_app.table_model import TableModel

from .enumeration import chain_rule_joint, output_distribution
from .policies import ContextHashPolicy

# exp(logit) values: fourth powers of rationals, so repetition penalty 2 followed by
# temperature 2 (two square roots) stays rational. Both sides of 1 (logit sign) occur.
POWER_WEIGHTS = [Fraction(n, 3) ** 4 for n in (1, 2, 3, 4, 6)]
PROMPT = (0, 1, 0)


def token_bytes(token: int) -> bytes:
    return bytes([97 + token])


@dataclass(frozen=True)
class Case:
    name: str
    target: SamplingSettings = SamplingSettings()
    draft: SamplingSettings = SamplingSettings()
    relation: str = "independent"  # how draft rows relate to target rows
    eos: bool = False


CASES = [
    Case("random"),
    Case("equal", relation="equal"),
    Case("disjoint_supports", relation="disjoint"),
    Case("zero_target_mass_on_drafted_token", relation="target_zero_on_draft_top"),
    Case("zero_draft_mass", relation="draft_half_support"),
    Case("target_temperature_half", target=SamplingSettings(temperature=Fraction(1, 2))),
    Case("draft_temperature_two", draft=SamplingSettings(temperature=2)),
    Case("top_k", target=SamplingSettings(top_k=2), draft=SamplingSettings(top_k=1)),
    Case("top_p", target=SamplingSettings(top_p=Fraction(1, 2)), draft=SamplingSettings(top_p=Fraction(3, 4))),
    Case(
        "repetition_penalty",
        target=SamplingSettings(repetition_penalty=2),
        draft=SamplingSettings(repetition_penalty=Fraction(1, 2)),
    ),
    Case("greedy_target", target=SamplingSettings(temperature=0)),
    Case("greedy_draft", draft=SamplingSettings(temperature=0)),
    Case(
        "all_processors_both_sides",
        target=SamplingSettings(temperature=2, top_k=3, top_p=Fraction(2, 3), repetition_penalty=2),
        draft=SamplingSettings(temperature=Fraction(1, 2), top_k=2, top_p=Fraction(3, 4)),
    ),
    Case("eos_inside_horizon", eos=True),
]
PROMPT_LOOKUP_CASES = ["random", "top_p", "greedy_target", "eos_inside_horizon", "all_processors_both_sides"]
SIZES = [(v, k) for v in (2, 3, 4) for k in (1, 2, 3)]
# The model draft with the neural proposer's stop rule (a proposal ends before a row over this entropy):
# the proposal length then depends on the drafted prefix, and the joint must still be the champion's.
ENTROPY_STOP_CASES = ["random", "draft_temperature_two", "repetition_penalty", "target_temperature_half"]


def random_row(rng: random.Random, support: list[int], vocab: int) -> list[Fraction]:
    row = [Fraction(0)] * vocab
    for token in support:
        row[token] = rng.choice(POWER_WEIGHTS)
    return row


def build_models(case: Case, vocab: int, horizon: int, seed: int) -> tuple[TableModel, TableModel]:
    rng = random.Random(seed)
    target_rows, draft_rows = {}, {}
    everything = list(range(vocab))
    for length in range(horizon):
        for suffix in itertools.product(everything, repeat=length):
            context = PROMPT + suffix
            if case.relation == "disjoint":
                target = random_row(rng, everything[0::2], vocab)
                draft = random_row(rng, everything[1::2], vocab)
            elif case.relation == "draft_half_support":
                target = random_row(rng, everything, vocab)
                draft = random_row(rng, everything[: max(1, vocab // 2)], vocab)
            else:
                target = random_row(rng, everything, vocab)
                draft = target if case.relation == "equal" else random_row(rng, everything, vocab)
                if case.relation == "target_zero_on_draft_top":
                    target = list(target)
                    target[max(everything, key=lambda t: (draft[t], -t))] = Fraction(0)
            target_rows[context] = target
            draft_rows[context] = draft
    target_rows[()] = draft_rows[()] = [Fraction(1)] * vocab  # unreachable fallback
    return TableModel(vocab, target_rows), TableModel(vocab, draft_rows)


def make_orchestrator(case: Case, target: TableModel, k: int, horizon: int) -> Orchestrator:
    config = GenerationConfig(
        max_new_tokens=horizon,
        k=k,
        settings=case.target,
        eos_ids=frozenset({target.vocab_size - 1}) if case.eos else frozenset(),
    )
    return Orchestrator(ReferenceChampion(target, ops=EXACT), NoProposer(), config, token_bytes)


def fixture_seed(vocab: int, k: int, case: Case) -> int:
    return zlib.crc32(f"{vocab}-{k}-{case.name}".encode())


def fixture_ids():
    for vocab, k in SIZES:
        for case in CASES:
            yield pytest.param(vocab, k, case, "draft", id=f"V{vocab}-k{k}-{case.name}-draft")
            yield pytest.param(vocab, k, case, "auto", id=f"V{vocab}-k{k}-{case.name}-auto")
            if case.name in PROMPT_LOOKUP_CASES:
                yield pytest.param(vocab, k, case, "prompt_lookup", id=f"V{vocab}-k{k}-{case.name}-prompt_lookup")
                yield pytest.param(vocab, k, case, "hybrid", id=f"V{vocab}-k{k}-{case.name}-hybrid")


def make_proposer(kind: str, case: Case, draft: TableModel):
    if kind == "prompt_lookup":
        return PromptLookup(n_max=2, n_min=1)
    if kind == "hybrid":  # lookup on a 2-gram match, else the model draft: the law switches per round
        return HybridProposer(ModelDraft(draft, case.draft, ops=EXACT), PromptLookup(n_max=2, n_min=2))
    if kind == "auto":  # the scheduler: source and k from a hash of the published context, per round
        return AutoProposer(
            ContextHashPolicy(), ModelDraft(draft, case.draft, ops=EXACT), PromptLookup(n_max=2, n_min=1)
        )
    return ModelDraft(draft, case.draft, ops=EXACT)


@pytest.mark.parametrize("vocab, k, case, kind", list(fixture_ids()))
def test_speculative_joint_equals_champion_joint(vocab, k, case, kind):
    horizon = k + 1
    target, draft = build_models(case, vocab, horizon, seed=fixture_seed(vocab, k, case))
    orchestrator = make_orchestrator(case, target, k, horizon)

    champion_alone = output_distribution(orchestrator, NoProposer(), PROMPT)
    speculative = output_distribution(orchestrator, make_proposer(kind, case, draft), PROMPT)
    direct = chain_rule_joint(target, case.target, PROMPT, horizon, orchestrator.config.eos_ids, EXACT)

    assert sum(direct.values()) == 1
    assert champion_alone == direct
    assert speculative == direct


class CountingStops(ModelDraft):
    """ModelDraft that counts the proposals its entropy stop cut short and those with drafts."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cut = self.drafted = 0

    def propose(self, context, k, round_index, draws):
        proposal = super().propose(context, k, round_index, draws)
        self.cut += len(proposal.tokens) < k
        self.drafted += len(proposal.tokens) > 0
        return proposal


@pytest.mark.parametrize("vocab, k", SIZES)
@pytest.mark.parametrize("case", [c for c in CASES if c.name in ENTROPY_STOP_CASES], ids=lambda c: c.name)
def test_a_proposal_that_stops_where_the_draft_is_unsure_keeps_the_champion_joint(vocab, k, case):
    """neural.py's stop rule on the model draft: the proposal ends before a draft row whose entropy exceeds
    a threshold, so its length depends on the drafted prefix. Thresholds are tried from the lowest entropy
    up until one both cuts proposals and lets drafts through (a stop that never fires, or always fires at
    once, proves nothing); the joint must equal the champion's at every threshold tried."""
    horizon = k + 1
    target, draft = build_models(case, vocab, horizon, seed=fixture_seed(vocab, k, case))
    orchestrator = make_orchestrator(case, target, k, horizon)
    direct = chain_rule_joint(target, case.target, PROMPT, horizon, orchestrator.config.eos_ids, EXACT)
    levels = sorted({entropy_bits(process_row(row, case.draft, ctx, EXACT)) for ctx, row in draft.rows.items() if ctx})
    for bits in levels:
        proposer = CountingStops(draft, case.draft, ops=EXACT, max_entropy_bits=bits)
        assert output_distribution(orchestrator, proposer, PROMPT) == direct, bits
        if proposer.cut and proposer.drafted:
            return
    pytest.fail(f"no threshold of {levels} both cut a proposal and let a draft through")


def _full_target_resample(target_row, draft_row):
    """Negative control: after a rejection, resample from p instead of norm([p - q]+)."""
    total = sum(target_row)
    return [p / total for p in target_row]


@pytest.mark.parametrize("vocab, k", SIZES)
# Not disjoint supports or a greedy target: there the residual *is* p, and the control is right.
@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CASES
        if c.name
        in (
            "random",
            "draft_temperature_two",
            "target_temperature_half",
            "zero_draft_mass",
            "repetition_penalty",
            "top_k",
        )
    ],
    ids=lambda c: c.name,
)
def test_negative_control_is_detected(vocab, k, case, monkeypatch):
    horizon = k + 1
    target, draft = build_models(case, vocab, horizon, seed=fixture_seed(vocab, k, case))
    orchestrator = make_orchestrator(case, target, k, horizon)
    direct = chain_rule_joint(target, case.target, PROMPT, horizon, frozenset(), EXACT)

    monkeypatch.setattr(acceptance, "positive_residual", _full_target_resample)
    wrong = output_distribution(orchestrator, ModelDraft(draft, case.draft, ops=EXACT), PROMPT)

    assert sum(wrong.values()) == 1  # still a distribution, just not the champion's
    assert wrong != direct
