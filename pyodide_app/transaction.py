"""The round transaction: stage a complete successor state off to the side, publish it once.

Published state S = (context, committed KV length, RNG round counter,
finish reason, generation). Processor state (repetition-penalty history,
stop-string window) is a pure function of the published context, so it is
committed and rolled back with it. Until `PublishedState.publish` runs,
nothing a round computed is visible; a failure anywhere before that leaves
S unchanged, and the round can be retried with the same round index (same
random numbers).

replay_frontier invariant: committed_kv == len(context) - 1 for an
unfinished request; context[-1] is the frontier, which has no KV row yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import StalePublication


@dataclass(frozen=True)
class RequestState:
    context: tuple[int, ...]  # prompt + output tokens
    prompt_length: int
    committed_kv: int  # champion KV rows that are authoritative
    round_index: int  # RNG counter of the next round
    generation: int  # +1 per published round (the publication fence)
    finish_reason: str | None = None  # None while generating
    draft_length: int = 0  # k for the next round (adaptive k moves it; fixed k keeps it)

    @classmethod
    def start(cls, prompt: tuple[int, ...], draft_length: int = 0) -> "RequestState":
        return cls(
            context=tuple(prompt),
            prompt_length=len(prompt),
            committed_kv=len(prompt) - 1,
            round_index=0,
            generation=0,
            draft_length=draft_length,
        )

    @property
    def output(self) -> tuple[int, ...]:
        return self.context[self.prompt_length :]


@dataclass(frozen=True)
class RoundCommit:
    """Everything one round decided, validated against its start state."""

    round_index: int
    expected_generation: int
    proposed: int  # drafts sent to verification (k of this round)
    accepted: int  # drafts accepted by the verifier (before stop truncation)
    emitted: tuple[int, ...]  # tokens appended to the output
    successor: RequestState
    draft_ms: float = field(default=0.0, compare=False)  # the round's proposal, wall time (not its decision)
    verify_ms: float = field(default=0.0, compare=False)  # the round's champion verify call, wall time


def stage_kv(start: RequestState, emitted: tuple[int, ...]) -> int:
    """Committed KV after the round: the old frontier plus every emitted token but the last.

    Emitted = accepted drafts (+ terminal); each accepted draft's row came from
    the verify pass, the last emitted token is the new, uncached frontier.
    """
    return start.committed_kv + len(emitted)


def stage_successor(
    start: RequestState, emitted: tuple[int, ...], committed_kv: int, finish_reason: str | None, draft_length: int
) -> RequestState:
    successor = replace(
        start,
        context=start.context + emitted,
        committed_kv=committed_kv,
        round_index=start.round_index + 1,
        generation=start.generation + 1,
        finish_reason=finish_reason,
        draft_length=draft_length,
    )
    if successor.committed_kv != len(successor.context) - 1:
        raise AssertionError("replay_frontier invariant broken: committed KV must be context length - 1")
    return successor


def finished(start: RequestState, reason: str) -> RequestState:
    """A terminal successor that emits nothing (cancellation, visible error)."""
    return replace(start, generation=start.generation + 1, finish_reason=reason)


class PublishedState:
    """The authoritative request state; changes only through `publish`."""

    def __init__(self, state: RequestState):
        self._state = state
        self._last_commit: RoundCommit | None = None

    @property
    def state(self) -> RequestState:
        return self._state

    def publish(self, commit: RoundCommit) -> RequestState:
        """Compare-and-swap on the generation. Publishing the same commit again is a no-op."""
        if commit == self._last_commit:
            return self._state
        if commit.expected_generation != self._state.generation or self._state.finish_reason is not None:
            raise StalePublication(
                f"round {commit.round_index} expected generation {commit.expected_generation}, "
                f"published is {self._state.generation}"
            )
        self._state = commit.successor
        self._last_commit = commit
        return self._state

    def close(self, reason: str) -> RequestState:
        """End the request without emitting (cancelled / error); output is kept as published."""
        if self._state.finish_reason is None:
            self._state = finished(self._state, reason)
        return self._state
