"""The neural proposer: the package's draft model (ONNX) with its own KV cache.

The model runs outside Python (onnxruntime natively, onnxruntime-web in the
browser) behind the `DraftRuntime` interface; the graph itself applies the
draft temperature and samples its token from a uniform we pass in
(Domain.DRAFT_SAMPLE at (round, i)), so no Python loop touches the
vocabulary. Its KV cache is rolled back to the longest common prefix with
the published context before each proposal: rejected drafts leave no trace,
and the pending correction/bonus token is fed as part of the new context.

The proposal stops where the draft is unsure: draft i is dropped, and the proposal ends, when the entropy
of its row q_i exceeds `max_entropy_bits` (the package's `draft.stop_entropy_bits`, from the draft's
measured calibration: for the shipped SmolLM2 draft acceptance falls from 1.0 below 0.25 bits to 0.05
above 6 bits, and the threshold is 3 bits; docs/BENCHMARKS.md "Draft calibration"). The stop depends on
q_i, a function of the context and the earlier drafts, never on the token drawn from it, so the proposal
length is a stopping time of the draft prefix and the accept/reject rule stays exact.
"""

from __future__ import annotations

import math
from operator import mul
from typing import Any, Generator, Protocol, Sequence

from ..acceptance import PointMass, ReducedRow
from ..champion import common_prefix
from ..errors import DraftRuntimeError
from ..processors import argmax
from ..rng import Domain
from ..sampling import Draws
from ..waits import Steps, Wait, settle
from .base import EMPTY_PROPOSAL, Proposal


class DraftRuntime(Protocol):
    vocab_size: int
    cached: list[int]  # tokens whose KV rows the runtime holds, in order

    def truncate(self, length: int) -> None:
        """Forget KV rows from `length` on."""

    def step(self, tokens: Sequence[int], temperature: float, uniform: float) -> Steps[tuple[int, Any]]:
        """Feed tokens after the cached ones; return (sampled token, its q row: FullRow or ReducedRow).
        temperature 0 means greedy (the graph returns the argmax and a point-mass row). The browser's
        runtime returns Steps."""

    def reset(self) -> None: ...


def as_floats(probs: Any) -> list[float]:
    """A q row's values (a list, array('f'), numpy array or, in the browser, a JS Float32Array: one copy)."""
    if hasattr(probs, "to_py"):
        probs = probs.to_py().cast("B").cast("f")
    return list(map(float, probs.tolist() if hasattr(probs, "tolist") else probs))


def entropy_bits(probs: Any) -> float:
    """-sum p log2 p of a q row."""
    positive = list(filter((0.0).__lt__, as_floats(probs)))
    return -math.fsum(map(mul, positive, map(math.log2, positive)))


def greedy_token(row: Any, values: list[float]) -> int:
    """The vocabulary id of the row's most probable entry (lowest index on ties)."""
    best = argmax(values)
    return int(row.ids[best]) if isinstance(row, ReducedRow) else best


class NeuralProposer:
    """propose is a generator (Steps, waits.py): the orchestrator drives it."""

    name = "neural"

    def __init__(self, runtime: DraftRuntime, temperature: float, max_entropy_bits: float | None = None):
        """max_entropy_bits: end the proposal before the first draft row more uncertain than this (the
        package's measured `draft.stop_entropy_bits`; None: always k drafts)."""
        self.runtime = runtime
        self.temperature = float(temperature)  # the draft's own processor: q = softmax(logits / T)
        self.max_entropy_bits = max_entropy_bits

    def propose(
        self, context: Sequence[int], k: int, round_index: int, draws: Draws | None
    ) -> Generator[Wait, None, Proposal]:
        if k <= 0:
            return EMPTY_PROPOSAL
        context = list(context)
        keep = min(common_prefix(self.runtime.cached, context), len(context) - 1)  # feed at least 1 token
        self.runtime.truncate(keep)
        pending = context[keep:]
        tokens, rows = [], []
        greedy = self.temperature == 0
        # A greedy draft with a stop asks the graph for its temperature-1 row (at temperature 0 the graph
        # reports a point mass, which says nothing about its certainty) and takes that row's argmax itself.
        measured = greedy and self.max_entropy_bits is not None
        graph_temperature = 1.0 if measured else self.temperature
        for i in range(k):
            uniform = 1.0 if greedy else draws.uniform(Domain.DRAFT_SAMPLE, round_index, i)
            try:
                token, row = yield from settle(self.runtime.step(pending, graph_temperature, uniform))
            except Exception as error:
                self.runtime.reset()  # its cache state is unknown now
                raise DraftRuntimeError(f"draft runtime failed: {type(error).__name__}: {error}") from error
            if self.max_entropy_bits is not None:
                values = as_floats(row.probs)
                if entropy_bits(values) > self.max_entropy_bits:
                    break  # q_i is too flat to pay: d_i is dropped (a function of the prefix, not of d_i)
                if measured:
                    token = greedy_token(row, values)
            tokens.append(token)
            rows.append(PointMass(token) if self.temperature == 0 else row)
            pending = [token]
        return Proposal(tuple(tokens), tuple(rows))

    def reset(self) -> None:
        self.runtime.reset()
