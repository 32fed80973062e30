"""The neural proposer's stop where the draft is unsure (proposers/neural.py): a proposal ends before the
first draft row whose entropy exceeds max_entropy_bits (the package's draft.stop_entropy_bits); the
runtime's KV cache then holds the context and the drafts kept. (Exactness of the rule: test_exhaustive.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from pyodide_app.acceptance import FullRow, PointMass
from pyodide_app.proposers.neural import AcceptanceByEntropy, DraftStep, NeuralProposer
from pyodide_app.sampling import SeededDraws
from pyodide_app.waits import finish

VOCAB = 64


class ScriptedRuntime:
    """A draft runtime whose i-th step reports entropy `bits[i]` and returns token 10 + i when greedy (else
    60, a sampled token) with a q row uniform over 2^bits tokens (rounded), recording what it was fed."""

    def __init__(self, bits):
        self.bits = list(bits)
        self.cached: list[int] = []
        self.vocab_size = VOCAB
        self.steps = 0
        self.temperatures = []
        self.fed: list[list[int]] = []  # the tokens of each step

    def reset(self):
        self.cached = []

    def truncate(self, length):
        del self.cached[length:]

    def step(self, tokens, temperature, uniform):
        self.cached += list(tokens)
        self.fed.append(list(tokens))
        self.temperatures.append(temperature)
        width = round(2 ** self.bits[self.steps])
        probs = np.zeros(VOCAB, np.float32)
        probs[10 + self.steps : 10 + self.steps + width] = 1 / width
        token = 10 + self.steps if temperature == 0 else 60
        entropy = float(self.bits[self.steps])
        self.steps += 1
        return DraftStep(token, FullRow(probs), entropy)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_the_proposal_ends_before_the_first_unsure_row(temperature):
    runtime = ScriptedRuntime([0, 1, 4, 0])  # 4 bits > 3: the third draft is dropped, and the proposal ends
    proposal = finish(NeuralProposer(runtime, temperature, 3.0).propose([1, 2, 3], 4, 0, SeededDraws(1)))
    expected = (10, 11) if temperature == 0 else (60, 60)  # the graph's tokens
    assert proposal.tokens == expected
    assert runtime.steps == 3 and runtime.cached == [1, 2, 3, *expected]  # the dropped draft was never fed
    kinds = {type(row) for row in proposal.rows}
    assert kinds == ({PointMass} if temperature == 0 else {FullRow})
    assert runtime.temperatures == [temperature] * 3  # the graph runs at the draft's own temperature


def test_a_first_row_too_unsure_gives_an_empty_proposal_and_no_threshold_never_cuts():
    assert finish(NeuralProposer(ScriptedRuntime([5]), 0.0, 3.0).propose([1, 2], 3, 0, None)).tokens == ()
    runtime = ScriptedRuntime([5, 5, 5])
    uncapped = NeuralProposer(runtime, 0.0)  # a package without a calibrated stop: the graph's greedy tokens
    assert finish(uncapped.propose([1, 2], 3, 0, None)).tokens == (10, 11, 12)
    assert runtime.temperatures == [0.0, 0.0, 0.0]


def test_a_keep_rule_ends_the_proposal_on_the_rows_entropies():
    """A caller's keep rule (auto's confident extension) sees the entropies of the rows drafted so far and may end
    the proposal before the entropy stop or k would. Fails if the rule is not asked, is asked with the wrong rows,
    or if the declined draft is kept or fed to the cache."""
    seen = []

    def keep(entropies):
        seen.append(list(entropies))
        return len(entropies) <= 2 or entropies[-1] < 1

    runtime = ScriptedRuntime([3, 0.5, 0.2, 2, 0])  # the fourth row (2 bits) is declined by the rule, not the stop
    proposal = finish(NeuralProposer(runtime, 0.0, 4.0).propose([1, 2], 5, 0, None, keep=keep))
    assert proposal.tokens == (10, 11, 12) and runtime.steps == 4 and runtime.cached == [1, 2, 10, 11, 12]
    assert seen == [[3], [3, 0.5], [3, 0.5, 0.2], [3, 0.5, 0.2, 2]]


def test_the_default_package_carries_the_shipped_drafts_stop(real_package, synth_package):
    import json

    from build_tools.prebuilt_draft import read_prebuilt
    from build_tools.recipes import DEFAULT_DRAFT
    from pyodide_app.native.loader import load_engine

    real = json.loads((real_package / "manifest.json").read_text())["draft"]
    calibrated = read_prebuilt(DEFAULT_DRAFT).provenance["calibration"]["stop_entropy_bits"]
    assert real["stop_entropy_bits"] == calibrated == 4.0  # the shipped draft's measured stop
    assert "stop_entropy_bits" not in json.loads((synth_package / "manifest.json").read_text())["draft"]
    assert load_engine(synth_package, backend="cpu").stop_bits is None
    # and its acceptance by entropy, with which auto drafts past k (0.97 below 0.25 bits ... 0.09 above 6)
    by_entropy = read_prebuilt(DEFAULT_DRAFT).acceptance_by_entropy
    assert real["acceptance_by_entropy"] == by_entropy and len(by_entropy["acceptance"]) == 8
    calibration = AcceptanceByEntropy.from_manifest(real["acceptance_by_entropy"])
    assert (calibration(0.1), calibration(1.5), calibration(7)) == (0.97, 0.74, 0.09)
    assert load_engine(synth_package, backend="cpu").draft_calibration is None


@pytest.mark.parametrize(
    "entry",
    [
        None,
        {"upper_bits": [1, 2]},
        {"upper_bits": [2, 1], "acceptance": [0.9, 0.5, 0.1]},  # bounds not increasing
        {"upper_bits": [1, 2], "acceptance": [0.9, 0.5]},  # no rate above the last bound
        {"upper_bits": [1, 2], "acceptance": [0.9, 1.5, 0.1]},  # not a probability
        {"upper_bits": "1,2", "acceptance": [0.9, 0.5, 0.1]},
    ],
)
def test_a_malformed_acceptance_by_entropy_is_no_calibration(entry):
    assert AcceptanceByEntropy.from_manifest(entry) is None
    assert AcceptanceByEntropy.from_manifest({"upper_bits": [1, 2], "acceptance": [0.9, 0.5, 0.1]})(1) == 0.9


def test_a_greedy_draft_keeps_its_cache_for_the_next_request_and_a_sampled_one_starts_empty():
    """A conversation's next greedy turn feeds the draft only what is new (the cache is rolled back to the
    common prefix); a sampled request starts from an empty cache, so its seeded q rows never depend on how
    earlier requests built it. Fails if reset always empties the cache (the greedy turn refeeds everything) or
    never does (the sampled request feeds only the new tokens)."""
    for temperature, fed in ((0.0, [4, 5]), (0.7, [1, 2, 3, 4, 5])):
        runtime = ScriptedRuntime([0] * 4)
        proposer = NeuralProposer(runtime, temperature)
        finish(proposer.propose([1, 2, 3], 1, 0, SeededDraws(1)))  # the first request's round
        proposer.reset()  # the next request: [1, 2, 3] + the new turn [4, 5]
        finish(proposer.propose([1, 2, 3, 4, 5], 1, 0, SeededDraws(2)))
        assert runtime.fed[-1] == fed and runtime.cached == [1, 2, 3, 4, 5], temperature
