"""Greedy speculation is token-identical to champion-alone greedy decoding.

Random n-gram table models (logits on a coarse grid, so exact ties are
common), every proposer, k = 1..8, with EOS tokens, stop strings that span
token boundaries, token limits and context limits. Tokens and finish
reasons must match exactly.
"""

from __future__ import annotations

import random

import pytest

from pyodide_app.champion import ReferenceChampion
from pyodide_app.costs import fixed_costs
from pyodide_app.orchestrator import Emitted, Finished, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings
from pyodide_app.proposers import HybridProposer, ModelDraft, NoProposer, PromptLookup
from pyodide_app.proposers.auto import AutoProposer, CostPolicy
from pyodide_app.proposers.neural import AcceptanceByEntropy
from pyodide_app.table_model import TableModel

from .policies import ContextHashPolicy

# Byte pieces per token: multi-byte characters split across tokens, an empty
# (special) token, spaces. Token ids beyond the table reuse it cyclically.
PIECES = [b"a", b"b", b"ab", b" ", b"\xc3", b"\xa9", b"", b"c", b"ba", b"\n", b"d", b"e", b"f", b"g", b"h", b"i"]
STOP_STRINGS = [(), ("ab",), ("b a", "\xe9"), ("cc",)]
K_VALUES = [1, 2, 3, 4, 6, 8]


def token_bytes(token: int) -> bytes:
    return PIECES[token % len(PIECES)]


def run(model, proposer, config, prompt, context_limit):
    champion = ReferenceChampion(model, context_limit=context_limit)
    events = list(Orchestrator(champion, proposer, config, token_bytes).generate(prompt))
    finished = events[-1]
    assert isinstance(finished, Finished)
    tokens = sum((e.tokens for e in events if isinstance(e, Emitted)), ())
    assert tokens == finished.state.output  # streamed == published
    return tokens, finished


SURE = AcceptanceByEntropy((1.0, 2.0), (0.95, 0.6, 0.1))  # a draft row's acceptance by its entropy (bits)


def proposers_for(model: TableModel, settings: SamplingSettings, rng: random.Random):
    vocab = model.vocab_size
    other = TableModel.random_ngram(vocab, order=1, seed=rng.randrange(1 << 30))
    return {
        "prompt_lookup": PromptLookup(n_max=3, n_min=1),
        "greedy_draft": ModelDraft(other, SamplingSettings(temperature=0)),
        "sampled_draft": ModelDraft(other, SamplingSettings(temperature=1.0)),
        "perfect_draft": ModelDraft(model, settings),  # the champion itself: every draft is right
        "hybrid": HybridProposer(ModelDraft(other, SamplingSettings(temperature=1.0)), PromptLookup(n_max=3, n_min=2)),
        # auto, with arbitrary state-based choices and with the cost policy on costs where drafting pays
        "auto_hash": AutoProposer(
            ContextHashPolicy(rng.randrange(1 << 30)), ModelDraft(other, SamplingSettings(temperature=1.0))
        ),
        "auto_cost": AutoProposer(
            CostPolicy(fixed_costs([10, 10.5, 11, 11.5, 12, 12.5, 13, 13.5, 14], 0.5)), ModelDraft(model, settings)
        ),
        # and with a calibration, so its neural rounds draft past k: a greedy draft's rows (point masses, 0 bits)
        # look sure, and this one is often wrong there
        "auto_extending": AutoProposer(
            CostPolicy(fixed_costs([10, 10.5, 11, 11.5, 12, 12.5, 13, 13.5, 14], 0.5), calibration=SURE),
            ModelDraft(other, SamplingSettings(temperature=0)),
        ),
    }


@pytest.mark.parametrize("seed", range(150))
def test_greedy_speculation_matches_champion_alone(seed):
    rng = random.Random(seed)
    vocab = rng.choice([5, 9, 16])
    model = TableModel.random_ngram(vocab, order=rng.choice([1, 2, 3]), seed=seed, levels=rng.choice([3, 9]))
    prompt = tuple(rng.randrange(vocab) for _ in range(rng.randint(1, 12)))
    penalty = rng.choice([1.0, 1.0, 1.5])
    settings = SamplingSettings(temperature=0, repetition_penalty=penalty)
    eos = frozenset({vocab - 1}) if seed % 3 == 0 else frozenset()
    stops = STOP_STRINGS[seed % len(STOP_STRINGS)]
    max_new = rng.choice([1, 2, 7, 40])
    context_limit = rng.choice([len(prompt) + 5, 1 << 20])

    base = GenerationConfig(max_new_tokens=max_new, k=0, settings=settings, eos_ids=eos, stop_strings=stops, seed=seed)
    expected, expected_end = run(model, NoProposer(), base, prompt, context_limit)
    assert expected_end.stats.proposed == 0

    for name, proposer in proposers_for(model, settings, rng).items():
        for k in K_VALUES:
            config = GenerationConfig(
                max_new_tokens=max_new, k=k, settings=settings, eos_ids=eos, stop_strings=stops, seed=seed
            )
            tokens, end = run(model, proposer, config, prompt, context_limit)
            assert tokens == expected, f"{name} k={k}"
            assert end.reason == expected_end.reason, f"{name} k={k}"
            assert end.stats.emitted == len(tokens)
            if name == "perfect_draft" and len(tokens) >= 2:
                assert end.stats.accepted >= 1  # the comparison is not vacuous


def cycle_model(vocab: int) -> TableModel:
    """Greedy output cycles 0, 1, ..., vocab-1, 0, ... (a copy-friendly answer)."""
    rows = {(t,): [4.0 if u == (t + 1) % vocab else 0.0 for u in range(vocab)] for t in range(vocab)}
    rows[()] = [0.0] * vocab
    return TableModel(vocab, rows)


def test_prompt_lookup_accepts_long_runs_on_repetitive_output():
    model = cycle_model(7)
    config = GenerationConfig(max_new_tokens=60, k=8, settings=SamplingSettings(temperature=0))
    expected, _ = run(model, NoProposer(), config, (0, 1, 2, 3, 4, 5, 6), 1 << 20)
    tokens, end = run(model, PromptLookup(), config, (0, 1, 2, 3, 4, 5, 6), 1 << 20)
    assert tokens == expected
    assert end.stats.accepted == end.stats.proposed  # every copied token is right
    # One period (7 tokens) can be copied per round, plus the bonus: ~8 tokens per champion call.
    assert end.stats.emitted / end.stats.rounds >= 6


def test_stats_time_each_verify_call_under_its_row_count():
    """verify_ms_by_rows files each round's verify call under T = drafts + 1 (fails if filed under accepted+1)."""
    model = cycle_model(7)
    config = GenerationConfig(max_new_tokens=30, k=8, settings=SamplingSettings(temperature=0))
    # "5, 6" recurs in the prompt followed by "3": the first proposal is rejected, later copies pass.
    _, end = run(model, PromptLookup(), config, (5, 6, 3, 1, 1, 4, 5, 6), 1 << 20)
    assert end.stats.accepted < end.stats.proposed and end.stats.accepted > 0
    by_rows = end.stats.verify_ms_by_rows
    assert sum(len(ms) for ms in by_rows.values()) == end.stats.rounds
    assert sum((rows - 1) * len(ms) for rows, ms in by_rows.items()) == end.stats.proposed
    assert all(t >= 0 for ms in by_rows.values() for t in ms)
    by_read = end.stats.verify_ms_by_read  # (T, accepted + 1): fails if filed under proposed, or by T alone
    assert sum((read - 1) * len(ms) for (_, read), ms in by_read.items()) == end.stats.accepted
    assert sorted(t for ms in by_read.values() for t in ms) == sorted(t for ms in by_rows.values() for t in ms)
    assert all(read <= rows for rows, read in by_read)
