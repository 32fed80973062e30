"""The champion interface, and a reference champion over any logits model.

One verification call scores [frontier, d_1..d_k] at positions c..c+k, where
c = committed_kv (the champion holds KV rows 0..c-1). Row j's logits score
the token at position c+j+1; row j's KV belongs to input j. The champion
decides acceptance itself (on the GPU in production) and returns only the
decision. Rollback is logical: rows written beyond the committed length are
never read, because attention only reads positions < committed + row.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from .acceptance import Decision, greedy_decision_by, stochastic_decision
from .processors import FLOAT, SamplingSettings, greedy_token, process_row
from .rng import philox_blocks
from .sampling import Draws
from .waits import Steps


@dataclass(frozen=True)
class VerifyRequest:
    context: tuple[int, ...]  # prompt + output; context[-1] is the frontier (no KV yet)
    committed_kv: int  # c == len(context) - 1
    drafts: tuple[int, ...]  # d_1..d_k
    draft_rows: tuple = ()  # q_1..q_k (FullRow | ReducedRow | PointMass); unused when greedy
    round_index: int = 0  # RNG counter word 0
    settings: SamplingSettings = field(default_factory=SamplingSettings)
    draws: Draws | None = None  # randomness of the request (None only when greedy)

    def __post_init__(self):
        if self.committed_kv != len(self.context) - 1:
            raise ValueError("replay_frontier: committed_kv must be len(context) - 1")
        if self.draft_rows and len(self.draft_rows) != len(self.drafts):
            raise ValueError("one draft row per draft token")

    @property
    def rows(self) -> int:
        """T = k + 1 query rows."""
        return len(self.drafts) + 1


class Champion(Protocol):
    vocab_size: int
    context_limit: int
    calls: int  # verify calls so far
    wait_seconds: float  # time blocked on the device finishing submitted work (0 where nothing is asynchronous)

    def prefill(self, tokens: Sequence[int]) -> Steps[None]:
        """Write KV rows 0..len(tokens)-1 for a new conversation prefix."""

    def verify(self, request: VerifyRequest) -> Steps[Decision]:
        """Score the request's rows and decide acceptance (see module doc). Either method may
        return Steps (waits.py) when it waits on an asynchronous runtime; callers settle them."""

    def forget(self) -> None:
        """Drop every cached KV row: the next request prefills from position 0, as a new conversation does."""

    def cached_rows(self, tokens: Sequence[int]) -> int:
        """How many leading rows of `tokens` the KV cache holds already (a prefill of `tokens` skips them)."""

    def memory_bytes(self) -> dict[str, int]:
        """{"weights", "kv" (capacity), "scratch" (activations, logits, verify buffers)}: bytes this champion holds."""

    # The self-test's probes (self_test.py): the same arithmetic verify uses, one piece at a time.
    def score(self, context: Sequence[int], tokens: Sequence[int]) -> Steps[list]:
        """Raw logits rows (f32 bytes or floats), one per token, of `tokens` scored in one call after `context`."""

    def verify_logits(self, logits_rows: Sequence[Sequence[float]], request: VerifyRequest) -> Decision:
        """The acceptance decision on given raw logits rows (no forward pass; the KV cache is untouched)."""

    def philox_words(self, cases: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[int, ...]]:
        """Philox4x32-10 of each (counter[4], key[2]) as this champion's verifier computes it."""


class LogitsModel(Protocol):
    vocab_size: int

    def logits(self, tokens: Sequence[int]) -> Sequence:
        """Raw next-token logits (or exact weights) after the whole sequence."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix: how many cached KV rows a new token sequence can keep."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class CachedPrefix:
    """The tokens whose KV rows a cache holds (row i holds tokens[i]): what every KV-caching runtime
    (champions, drafts) tracks to know which rows a new token sequence may keep."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    def __len__(self) -> int:
        return len(self.tokens)

    def holds(self, prefix: Sequence[int]) -> bool:
        """Rows 0..len(prefix)-1 hold exactly `prefix`."""
        return len(self.tokens) >= len(prefix) and self.tokens[: len(prefix)] == list(prefix)

    def keep_common(self, tokens: Sequence[int]) -> int:
        """Keep the rows `tokens` shares with the cache; return how many that is."""
        self.truncate(common_prefix(self.tokens, tokens))
        return len(self.tokens)

    def truncate(self, length: int) -> None:
        del self.tokens[length:]

    def clear(self) -> None:
        self.tokens = []

    def extend(self, tokens: Sequence[int]) -> None:
        self.tokens.extend(tokens)

    def write(self, position: int, tokens: Sequence[int]) -> None:
        """Rows position.. now hold `tokens` (and rows after them nothing known)."""
        self.tokens = self.tokens[:position] + list(tokens)


class SessionAdapter:
    """Base of the runtime adapters over one KV session (`self.session`: `cached`, `reset`, `truncate`):
    the KV bookkeeping is the session's; a subclass adds only its own call (a draft's step, a champion's
    run). Natively and in the browser, for the draft and for the CPU champion."""

    session: Any

    @property
    def cached(self) -> list[int]:
        return self.session.cached

    def reset(self) -> None:
        self.session.reset()

    def truncate(self, length: int) -> None:
        self.session.truncate(length)


def kv_capacity_bytes(config: dict, positions: int) -> int:
    """f32 K and V rows for every layer and KV head at `positions` positions."""
    return 2 * config["n_layers"] * config["n_kv_heads"] * config["head_dim"] * positions * 4


class RowsOnDemand(SequenceABC):
    """A runtime call's logits rows (the CPU champion's), each made a list of floats [V] when first read, and
    what the runtime found of each row's order while it had the row at hand: best[j], the index of row j's
    largest logit (the first on ties) where every logit of the row is finite, else -1. Making a 49,152-float
    row a list costs ~3 ms in Pyodide under Node, and its greedy checks and argmax ~8 ms more, where a 1-row
    round's champion call is ~42 ms: a greedy round reads best alone, and a sampled one converts the rows
    it reads (up to the first rejection), not all."""

    def __init__(
        self,
        count: int,
        convert: Callable[[int], list[float]],
        best: Sequence[int] | None = None,
        processed: Callable[[int, SamplingSettings], list | None] | None = None,
    ):
        self.count, self.convert = count, convert  # convert(j): row j as a list
        self.best = best
        # processed(j, settings): row j processed by the runtime (sampled, no repetition penalty), or None where
        # Python must process the row itself (the page: row_processing.js's processedRow, ~1 ms against ~30)
        self.processed = processed
        self.made: dict[int, list[float]] = {}

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(self.count))]
        j = range(self.count)[j]  # IndexError past the end; negative indices count from it
        if j not in self.made:
            self.made[j] = self.convert(j)
        return self.made[j]


class ProcessedRows:
    """Row j processed at its own history (context + the round's first j drafts), on first use: the
    acceptance rule reads rows only up to its first rejection, as the verify kernel processes them."""

    def __init__(self, raw_rows: Sequence[Sequence], request: VerifyRequest, ops):
        self.raw_rows, self.request, self.ops = raw_rows, request, ops
        self.done: dict[int, list] = {}

    def __len__(self) -> int:
        return len(self.raw_rows)

    def history(self, j: int) -> tuple[int, ...]:
        return self.request.context + self.request.drafts[:j]

    def __getitem__(self, j: int) -> list:
        if j not in self.done:
            row = self.processed_by_runtime(j)
            if row is None:
                row = process_row(self.raw_rows[j], self.request.settings, self.history(j), self.ops)
            self.done[j] = row
        return self.done[j]

    def processed_by_runtime(self, j: int) -> list | None:
        """Row j as the runtime processed it, where it can: a sampled row without a repetition penalty (which
        would need the row's history), in float arithmetic; None otherwise, or where the runtime declines."""
        settings = self.request.settings
        processed = self.raw_rows.processed if isinstance(self.raw_rows, RowsOnDemand) else None
        if processed is None or settings.greedy or settings.repetition_penalty != 1 or self.ops is not FLOAT:
            return None
        return processed(j, settings)

    def greedy(self, j: int) -> int:
        """Row j's greedy token. The runtime's best[j] where it has one (a finite row) and no processor
        reorders the row (a repetition penalty does); otherwise from the row itself, checked."""
        settings = self.request.settings
        known = self.raw_rows.best if isinstance(self.raw_rows, RowsOnDemand) else None
        if known is not None and known[j] >= 0 and settings.repetition_penalty == 1:
            return known[j]
        return greedy_token(self.raw_rows[j], settings, self.history(j), self.ops)


def decide(raw_rows: Sequence[Sequence], request: VerifyRequest, ops=FLOAT) -> Decision:
    """The acceptance rule on the rows, each processed at its own history when the rule first reads it."""
    rows = ProcessedRows(raw_rows, request, ops)
    if request.settings.greedy:
        return greedy_decision_by(rows.greedy, request.drafts)
    return stochastic_decision(
        rows, request.drafts, request.draft_rows, request.draws, request.round_index, len(request.context)
    )


class ReferenceChampion:
    """Champion over a stateless logits model: recomputes each row from its prefix."""

    def __init__(self, model: LogitsModel, context_limit: int = 1 << 20, ops=FLOAT):
        self.model = model
        self.vocab_size = model.vocab_size
        self.context_limit = context_limit
        self.ops = ops
        self.calls = 0
        self.wait_seconds = 0.0

    def prefill(self, tokens: Sequence[int]) -> None:
        pass  # stateless: nothing cached

    def forget(self) -> None:
        pass

    def cached_rows(self, tokens: Sequence[int]) -> int:
        return 0  # stateless: every row is recomputed

    def memory_bytes(self) -> dict[str, int]:
        return {"weights": 0, "kv": 0, "scratch": 0}  # a test model in Python objects: nothing on a device

    def verify(self, request: VerifyRequest) -> Decision:
        self.calls += 1
        inputs = request.context + request.drafts
        raw_rows = [self.model.logits(inputs[: len(request.context) + j]) for j in range(request.rows)]
        return decide(raw_rows, request, self.ops)

    def score(self, context: Sequence[int], tokens: Sequence[int]) -> list:
        inputs = tuple(context) + tuple(tokens)
        return [self.model.logits(inputs[: len(context) + j + 1]) for j in range(len(tokens))]

    def verify_logits(self, logits_rows: Sequence[Sequence[float]], request: VerifyRequest) -> Decision:
        return decide(logits_rows, request, self.ops)

    @staticmethod
    def philox_words(cases: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[int, ...]]:
        return philox_blocks(cases)
