"""The speculative round loop.

One round (replay_frontier, see champion.py):
    propose  up to k tokens from the published context (k <= tokens left)
    verify   the champion scores [frontier, d_1..d_k] and decides (A, terminal)
    decide   emitted = d_1..d_A + terminal, cut at the first stop (EOS, stop
             string, token limit): no bonus after an accepted stop
    stage    committed KV, context, RNG round counter -> successor state
    publish  one compare-and-swap makes the successor authoritative

Failure rule: a failure before the answer's first emitted token falls back
silently to champion-alone (the fallback code is recorded); after it, the
answer ends with finish_reason "error" and a visible error code, keeping the
text already published. Cancellation discards the round in flight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Generator, Iterator, Sequence

from .acceptance import Decision
from .champion import Champion, VerifyRequest
from .errors import Cancelled, DraftNumericError, InvalidSettings, PromptTooLong, VerifyResultError
from .processors import SamplingSettings
from .proposers.base import EMPTY_PROPOSAL, NoProposer, Proposal, Proposer
from .sampling import Draws, SeededDraws
from .stops import StopPolicy
from .transaction import PublishedState, RequestState, RoundCommit, stage_kv, stage_successor
from .waits import Wait, finish, settle

FINISH_CANCELLED = "cancelled"
FINISH_ERROR = "error"


class FaultPoint(str, Enum):
    """Where a round can fail; each is a test hook (seed 001, 0x06E)."""

    AFTER_VERIFY = "after_verify"
    AFTER_DECISION = "after_decision"
    AFTER_STAGE_KV = "after_stage_kv"
    AFTER_STAGE_OUTPUT = "after_stage_output"
    BEFORE_PUBLISH = "before_publish"


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 256
    k: int = 4  # requested draft length per round
    k_max: int = 8  # what the champion's buffers were sized for
    settings: SamplingSettings = field(default_factory=SamplingSettings)
    eos_ids: frozenset[int] = frozenset()
    stop_strings: tuple[str, ...] = ()
    seed: int = 0
    adaptive: bool = False  # adapt k between rounds (see next_draft_length)

    def validate(self) -> "GenerationConfig":
        """The one check of these fields (the engine's requests are checked here too)."""
        check_integer("k_max", self.k_max, 0)
        check_integer("k", self.k, 0, self.k_max)
        check_integer("max_new_tokens", self.max_new_tokens, 1)
        check_integer("seed", self.seed, 0, (1 << 64) - 1, "[0, 2^64)")
        if not isinstance(self.adaptive, bool):
            raise InvalidSettings(f"adaptive must be true or false, got {self.adaptive!r}")
        self.settings.validate()
        return self


def check_integer(name: str, value, low: int, high: int | None = None, span: str | None = None) -> None:
    """value is an int (not a bool) in [low, high]; InvalidSettings naming the field otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        wanted = span or (f"in [{low}, {high}]" if high is not None else f">= {low}")
        raise InvalidSettings(f"{name} must be an integer {wanted}, got {value!r}")


@dataclass
class SpecStats:
    rounds: int = 0  # published rounds
    champion_calls: int = 0  # verify calls, including rounds that failed
    proposed: int = 0  # draft tokens sent to verification
    accepted: int = 0  # draft tokens the verifier accepted
    emitted: int = 0  # output tokens published
    draft_failures: int = 0  # rounds whose proposer failed numerically (ran as plain steps)
    accepted_histogram: dict[int, int] = field(default_factory=dict)  # A -> rounds (rounds with a proposal)
    reached: list[int] = field(default_factory=list)  # reached[i]: rounds that tested draft i
    accepted_at: list[int] = field(default_factory=list)  # accepted_at[i]: rounds that accepted draft i
    fallback_code: str | None = None  # failure that switched this answer to champion-alone
    error_code: str | None = None  # visible failure that ended the answer
    draft_seconds: float = 0.0  # proposer time, all rounds
    verify_seconds: float = 0.0  # champion verify calls (GPU work + the 20-byte read back)
    sync_seconds: float = 0.0  # part of verify_seconds spent waiting on the device (champion.wait_seconds)
    total_seconds: float = 0.0  # the whole request, prefill included
    cached_prompt_tokens: int = 0  # prompt tokens whose KV rows the champion held already (prefill skipped them)
    # (T, rows read = accepted + 1) -> each round's verify call, ms: what a read row adds (auto's row_ms)
    verify_ms_by_read: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def record(self, commit: RoundCommit) -> None:
        self.rounds += 1
        self.proposed += commit.proposed
        self.accepted += commit.accepted
        self.emitted += len(commit.emitted)
        self.verify_ms_by_read.setdefault((commit.proposed + 1, commit.accepted + 1), []).append(commit.verify_ms)
        if commit.proposed:
            self.accepted_histogram[commit.accepted] = self.accepted_histogram.get(commit.accepted, 0) + 1
        for i in range(commit.proposed):
            if i > commit.accepted:
                break
            while len(self.reached) <= i:
                self.reached.append(0)
                self.accepted_at.append(0)
            self.reached[i] += 1
            self.accepted_at[i] += i < commit.accepted

    @property
    def verify_ms_by_rows(self) -> dict[int, list[float]]:
        """T -> each round's verify call, ms (verify_ms_by_read over every rows-read count)."""
        by_rows: dict[int, list[float]] = {}
        for (rows, _), ms in self.verify_ms_by_read.items():
            by_rows.setdefault(rows, []).extend(ms)
        return by_rows

    @property
    def tokens_per_call(self) -> float:
        return self.emitted / self.champion_calls if self.champion_calls else 0.0

    def survival(self) -> list[float]:
        """S_i = prod_{j<=i} P(draft j accepted | reached), i = 1..; S_0 = 1 is implied."""
        out, s = [], 1.0
        for reached, accepted in zip(self.reached, self.accepted_at):
            s *= accepted / reached
            out.append(s)
        return out


@dataclass(frozen=True)
class Emitted:
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Finished:
    reason: str  # "stop" | "length" | "cancelled" | "error"
    state: RequestState
    stats: SpecStats


class CancelToken:
    def __init__(self):
        self.requested = False

    def cancel(self) -> None:
        self.requested = True


def next_draft_length(current: int, proposed: int, accepted: int, k_max: int) -> int:
    """Adaptive k, a pure function of the round just published (so runs are reproducible):
    every draft accepted -> k + 1; fewer than half accepted -> k - 1 (never below 1);
    otherwise, or when nothing was proposed, k stays."""
    if proposed == 0:
        return current
    if accepted == proposed:
        return min(current + 1, k_max)
    if 2 * accepted < proposed:
        return max(current - 1, 1)
    return current


def check_decision(decision: Decision, proposed: int, vocab_size: int) -> None:
    """A verifier result outside its contract (e.g. a corrupted GPU readback) is an error, never output."""
    if not 0 <= decision.accepted <= proposed or not 0 <= decision.terminal < vocab_size:
        raise VerifyResultError(
            f"verifier returned accepted={decision.accepted} of {proposed}, terminal={decision.terminal}"
        )


class Orchestrator:
    """Runs requests for one champion and one proposer."""

    def __init__(
        self,
        champion: Champion,
        proposer: Proposer,
        config: GenerationConfig,
        token_bytes: Callable[[int], bytes],
        draws: Draws | None = None,
        faults: Callable[[FaultPoint], None] | None = None,
    ):
        self.champion = champion
        self.proposer = proposer
        self.config = config.validate()
        self.token_bytes = token_bytes
        self.draws = draws if draws is not None else SeededDraws(config.seed)
        self.faults = faults
        self.cancel: CancelToken | None = None
        self.stats = SpecStats()  # of the current (or last) request

    # -- one round ---------------------------------------------------------

    def round(self, start: RequestState, proposer: Proposer, stops: StopPolicy) -> RoundCommit:
        """Stage one round from `start`. Publishes nothing. (Synchronous runtimes only.)"""
        return finish(self.round_steps(start, proposer, stops))

    def round_steps(
        self, start: RequestState, proposer: Proposer, stops: StopPolicy
    ) -> Generator[Wait, None, RoundCommit]:
        """`round` as Steps: yields the Waits of asynchronous runtimes (waits.py), returns the commit."""
        k = min(start.draft_length, stops.max_new_tokens - len(start.output))
        began = time.perf_counter()
        proposal = yield from self._propose(proposer, start, k)
        proposed_at = time.perf_counter()
        self.stats.draft_seconds += proposed_at - began
        request = VerifyRequest(
            context=start.context,
            committed_kv=start.committed_kv,
            drafts=proposal.tokens,
            draft_rows=proposal.rows,
            round_index=start.round_index,
            settings=self.config.settings,
            draws=self.draws,
        )
        self.stats.champion_calls += 1
        waited = self.champion.wait_seconds
        decision = yield from settle(self.champion.verify(request))
        verified_at = time.perf_counter()
        self.stats.verify_seconds += verified_at - proposed_at
        self.stats.sync_seconds += self.champion.wait_seconds - waited
        check_decision(decision, len(proposal.tokens), self.champion.vocab_size)
        self._checkpoint(FaultPoint.AFTER_VERIFY)
        wanted = proposal.tokens[: decision.accepted] + (decision.terminal,)
        emitted, finish_reason = stops.apply(start.output, wanted)
        self._checkpoint(FaultPoint.AFTER_DECISION)
        committed_kv = stage_kv(start, emitted)
        self._checkpoint(FaultPoint.AFTER_STAGE_KV)
        draft_length = start.draft_length
        if self.config.adaptive:
            draft_length = next_draft_length(draft_length, len(proposal.tokens), decision.accepted, self.config.k_max)
        successor = stage_successor(start, emitted, committed_kv, finish_reason, draft_length)
        self._checkpoint(FaultPoint.AFTER_STAGE_OUTPUT)
        commit = RoundCommit(
            round_index=start.round_index,
            expected_generation=start.generation,
            proposed=len(proposal.tokens),
            accepted=decision.accepted,
            emitted=emitted,
            successor=successor,
            draft_ms=(proposed_at - began) * 1000,
            verify_ms=(verified_at - proposed_at) * 1000,
        )
        return commit

    def _propose(self, proposer: Proposer, start: RequestState, k: int) -> Generator[Wait, None, Proposal]:
        if k <= 0:
            return EMPTY_PROPOSAL
        try:
            proposal = yield from settle(proposer.propose(start.context, k, start.round_index, self.draws))
        except DraftNumericError:
            self.stats.draft_failures += 1
            return EMPTY_PROPOSAL  # the round becomes a plain champion step; still exact
        if len(proposal.tokens) > k:
            raise ValueError(f"proposer {proposer.name} returned {len(proposal.tokens)} tokens for k={k}")
        for i, token in enumerate(proposal.tokens):
            if token in self.config.eos_ids:  # nothing after an EOS can be emitted
                return proposal.truncated(i + 1)
        return proposal

    def _checkpoint(self, point: FaultPoint) -> None:
        if self.faults is not None:
            self.faults(point)
        if self.cancel is not None and self.cancel.requested:
            raise Cancelled(f"cancelled at {point.value}")

    # -- the request loop --------------------------------------------------

    def stop_policy(self, prompt_length: int) -> StopPolicy:
        limit = min(self.config.max_new_tokens, self.champion.context_limit - prompt_length)
        return StopPolicy.build(self.config.eos_ids, self.config.stop_strings, limit, self.token_bytes)

    def validate_prompt(self, prompt: Sequence[int]) -> tuple[int, ...]:
        prompt = tuple(prompt)
        if not prompt:
            raise InvalidSettings("the prompt has no tokens")
        if len(prompt) >= self.champion.context_limit:
            raise PromptTooLong(
                f"prompt is {len(prompt)} tokens; the context limit is {self.champion.context_limit} "
                "and at least one token must fit after it"
            )
        bad = [t for t in prompt if not 0 <= t < self.champion.vocab_size]
        if bad:
            raise InvalidSettings(f"prompt token {bad[0]} is outside the vocabulary")
        return prompt

    def generate(self, prompt: Sequence[int], cancel: CancelToken | None = None) -> Iterator[Emitted | Finished | Wait]:
        """Stream Emitted events, then one Finished event. Validation errors raise before any work.
        With asynchronous runtimes (the browser without JSPI) their Waits come through this stream too;
        the driver settles each before asking for the next event."""
        prompt = self.validate_prompt(prompt)
        stops = self.stop_policy(len(prompt))
        return self._run(prompt, stops, cancel)

    def _run(
        self, prompt: tuple[int, ...], stops: StopPolicy, cancel: CancelToken | None
    ) -> Iterator[Emitted | Finished | Wait]:
        self.cancel = cancel
        self.stats = stats = SpecStats()
        proposer = self.proposer
        proposer.reset()
        began = time.perf_counter()
        published = PublishedState(RequestState.start(prompt, self.config.k))
        stats.cached_prompt_tokens = self.champion.cached_rows(prompt[:-1])
        yield from settle(self.champion.prefill(prompt[:-1]))
        while published.state.finish_reason is None:
            start = published.state
            try:
                if cancel is not None and cancel.requested:
                    raise Cancelled("cancelled between rounds")
                commit = yield from self.round_steps(start, proposer, stops)
                self._checkpoint(FaultPoint.BEFORE_PUBLISH)
                published.publish(commit)
                observe = getattr(proposer, "observe", None)  # schedulers (proposers/auto.py) learn from it
                if observe is not None:
                    observe(commit)
            except Cancelled:
                published.close(FINISH_CANCELLED)
                break
            except Exception as failure:
                code = getattr(failure, "code", "INTERNAL")
                if not start.output and not isinstance(proposer, NoProposer):
                    stats.fallback_code = code  # nothing shown yet: silently retry champion-alone
                    proposer = NoProposer()
                    continue
                stats.error_code = code
                published.close(FINISH_ERROR)
                break
            stats.record(commit)
            yield Emitted(commit.emitted)
        stats.total_seconds = time.perf_counter() - began
        yield Finished(published.state.finish_reason, published.state, stats)
