"""The neural proposer: the package's draft model (ONNX) with its own KV cache.

The model runs outside Python (onnxruntime natively, onnxruntime-web in the
browser) behind the `DraftRuntime` interface; the graph itself applies the
draft temperature and samples its token from a uniform we pass in
(Domain.DRAFT_SAMPLE at (round, i)), so no Python loop touches the
vocabulary. Its KV cache is rolled back to the longest common prefix with
the published context before each proposal: rejected drafts leave no trace,
and the pending correction/bonus token is fed as part of the new context. A greedy
proposer keeps the cache from one request to the next (reset), so a conversation's
next turn feeds the draft only what is new.

The proposal stops where the draft is unsure: draft i is dropped, and the proposal ends, when the entropy
of its row exceeds `max_entropy_bits` (the package's `draft.stop_entropy_bits`, from the draft's measured
calibration: for the shipped SmolLM2 draft acceptance falls from 1.0 below 0.25 bits to 0.1 above 6 bits,
and the threshold is 4 bits; docs/BENCHMARKS.md "Draft calibration"). The graph reports that entropy
(of softmax(logits / T), T = 1 for a greedy draft), so Python never reads the vocabulary row. The stop
depends on the row, a function of the context and the earlier drafts, never on the token drawn from it,
so the proposal length is a stopping time of the draft prefix and the accept/reject rule stays exact.
A caller may end it earlier by the same kind of rule (`keep`, base.KeepRule: auto's confident extension).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Generator, NamedTuple, Protocol, Sequence

from ..acceptance import PointMass
from ..champion import common_prefix
from ..errors import DraftRuntimeError
from ..rng import Domain
from ..sampling import Draws
from ..waits import Steps, Wait, settle
from .base import EMPTY_PROPOSAL, KeepRule, Proposal


class DraftStep(NamedTuple):
    """One run of the draft graph (export_onnx add_sampler)."""

    token: int  # vocabulary id: the argmax at temperature 0, else the draw at `uniform` from row
    row: Any  # its q row (FullRow or ReducedRow; a point mass at temperature 0)
    entropy_bits: float  # of softmax(logits / T) before quantising, T = 1 at temperature 0


class DraftRuntime(Protocol):
    vocab_size: int
    cached: list[int]  # tokens whose KV rows the runtime holds, in order

    def truncate(self, length: int) -> None:
        """Forget KV rows from `length` on."""

    def step(self, tokens: Sequence[int], temperature: float, uniform: float) -> Steps[DraftStep]:
        """Feed tokens after the cached ones; run the graph at (temperature, uniform). The browser's
        runtime returns Steps."""

    def reset(self) -> None: ...


class NeuralProposer:
    """propose is a generator (Steps, waits.py): the orchestrator drives it."""

    name = "neural"

    def __init__(self, runtime: DraftRuntime, temperature: float, max_entropy_bits: float | None = None):
        """max_entropy_bits: end the proposal before the first draft row more uncertain than this (the
        package's measured `draft.stop_entropy_bits`; None: always k drafts)."""
        self.runtime = runtime
        self.temperature = float(temperature)  # the draft's own processor: q = softmax(logits / T)
        self.max_entropy_bits = max_entropy_bits

    def pending(self, context: Sequence[int]) -> int:
        """Tokens a proposal on `context` feeds the draft before its first draft (at least 1; a fresh cache:
        all of them)."""
        return len(context) - self.kept(context)

    def kept(self, context: Sequence[int]) -> int:
        """The cached rows a proposal on `context` keeps: the common prefix, less one so it feeds at least 1."""
        return min(common_prefix(self.runtime.cached, context), len(context) - 1)

    def propose(
        self, context: Sequence[int], k: int, round_index: int, draws: Draws | None, keep: KeepRule | None = None
    ) -> Generator[Wait, None, Proposal]:
        """Up to k drafts, ending before the first row over the entropy stop or that `keep` declines."""
        if k <= 0:
            return EMPTY_PROPOSAL
        context = list(context)
        kept = self.kept(context)
        self.runtime.truncate(kept)
        pending = context[kept:]
        tokens, rows, entropies = [], [], []
        greedy = self.temperature == 0
        for i in range(k):
            uniform = 1.0 if greedy else draws.uniform(Domain.DRAFT_SAMPLE, round_index, i)
            try:
                step = yield from settle(self.runtime.step(pending, self.temperature, uniform))
            except Exception as error:
                self.runtime.reset()  # its cache state is unknown now
                raise DraftRuntimeError(f"draft runtime failed: {type(error).__name__}: {error}") from error
            if self.max_entropy_bits is not None and step.entropy_bits > self.max_entropy_bits:
                break  # the row is too flat to pay: d_i is dropped (a function of the prefix, not of d_i)
            entropies.append(step.entropy_bits)
            if keep is not None and not keep(entropies):
                break  # the caller's rule on the rows' entropies, likewise
            tokens.append(step.token)
            rows.append(PointMass(step.token) if greedy else step.row)
            pending = [step.token]
        return Proposal(tuple(tokens), tuple(rows))

    def reset(self) -> None:
        """A new request. A sampled one starts the draft from an empty cache: the draft is not batch invariant, so
        a row's last bits depend on how its cache was built, and with another history its q rows, and so the
        draws of a seeded answer, could differ. A greedy one keeps the cache (rolled back to the new context's
        common prefix by its first proposal): its tokens are the champion's whatever the draft proposes, and the
        next turn of a conversation then feeds the draft only what is new, not the whole conversation again
        (~1 s at 1,700 tokens on the page's CPU path)."""
        if self.temperature > 0:
            self.forget()

    def forget(self) -> None:
        """Empty the draft's cache (the cost measurement times a catch-up from empty)."""
        self.runtime.reset()


@dataclass(frozen=True)
class AcceptanceByEntropy:
    """The draft's measured greedy acceptance by the entropy of its row (the package's
    `draft.acceptance_by_entropy`, from scripts/draft_calibration.py): acceptance[i] for entropies in
    (upper_bits[i - 1], upper_bits[i]], the last one above every bound. Shipped draft: 0.97 below 0.25 bits,
    0.74 at 1-2, 0.19 at 4-6, 0.09 above 6."""

    upper_bits: tuple[float, ...]  # increasing
    acceptance: tuple[float, ...]  # one more than upper_bits, each in [0, 1]

    def __call__(self, bits: float) -> float:
        return self.acceptance[bisect_left(self.upper_bits, bits)]

    @classmethod
    def from_manifest(cls, entry) -> "AcceptanceByEntropy | None":
        """The package field ({"upper_bits": [...], "acceptance": [...]}), None where absent or malformed."""
        try:
            bounds = tuple(float(b) for b in entry["upper_bits"])
            rates = tuple(float(a) for a in entry["acceptance"])
        except (KeyError, TypeError, ValueError):
            return None
        ordered = all(a < b for a, b in zip(bounds, bounds[1:]))
        if not ordered or len(rates) != len(bounds) + 1 or not all(0 <= a <= 1 for a in rates):
            return None
        return cls(bounds, rates)
