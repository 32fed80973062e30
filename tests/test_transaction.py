"""Round transactions under fault injection, idempotent publication, the failure rule, cancellation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pyodide_app.champion import ReferenceChampion
from pyodide_app.errors import StalePublication
from pyodide_app.orchestrator import CancelToken, Emitted, FaultPoint, Finished, GenerationConfig, Orchestrator
from pyodide_app.processors import SamplingSettings
from pyodide_app.proposers import ModelDraft, NoProposer, PromptLookup
from pyodide_app.table_model import TableModel
from pyodide_app.transaction import PublishedState, RequestState

VOCAB = 9
PROMPT = (1, 2, 3, 1, 2)
MODEL = TableModel.random_ngram(VOCAB, order=2, seed=7)
DRAFT = TableModel.random_ngram(VOCAB, order=1, seed=8)


class InjectedFault(RuntimeError):
    code = "INJECTED"


class FaultAt:
    """Raise at `point` on its n-th occurrence (1-based); record every point reached."""

    def __init__(self, point: FaultPoint | None, occurrence: int = 1, action=None):
        self.point, self.occurrence, self.action = point, occurrence, action
        self.seen: list[FaultPoint] = []

    def __call__(self, point: FaultPoint) -> None:
        self.seen.append(point)
        if point == self.point and self.seen.count(point) == self.occurrence:
            if self.action is not None:
                return self.action()
            raise InjectedFault(f"injected at {point.value}")


def orchestrator(proposer, faults=None, temperature=1.0, k=3, max_new=24):
    config = GenerationConfig(max_new_tokens=max_new, k=k, settings=SamplingSettings(temperature=temperature), seed=42)
    return Orchestrator(ReferenceChampion(MODEL), proposer, config, lambda t: bytes([97 + t]), faults=faults)


def collect(events):
    events = list(events)
    assert isinstance(events[-1], Finished)
    streamed = sum((e.tokens for e in events if isinstance(e, Emitted)), ())
    return streamed, events[-1]


def test_round_points_are_visited_in_order():
    recorder = FaultAt(None)
    run = orchestrator(ModelDraft(DRAFT, SamplingSettings()), faults=recorder)
    stops = run.stop_policy(len(PROMPT))
    run.round(RequestState.start(PROMPT, 3), run.proposer, stops)
    assert recorder.seen == [
        FaultPoint.AFTER_VERIFY,
        FaultPoint.AFTER_DECISION,
        FaultPoint.AFTER_STAGE_KV,
        FaultPoint.AFTER_STAGE_OUTPUT,
    ]


ROUND_POINTS = [p for p in FaultPoint if p is not FaultPoint.BEFORE_PUBLISH]


@pytest.mark.parametrize("point", ROUND_POINTS, ids=lambda p: p.value)
@pytest.mark.parametrize("proposer", [PromptLookup(), ModelDraft(DRAFT, SamplingSettings())], ids=lambda p: p.name)
def test_failed_round_leaves_published_state_unchanged_and_retry_is_identical(point, proposer):
    clean = orchestrator(proposer)
    stops = clean.stop_policy(len(PROMPT))
    published = PublishedState(RequestState.start(PROMPT, 3))
    # Advance a few rounds so the state is not the trivial start.
    for _ in range(3):
        commit = clean.round(published.state, proposer, stops)
        published.publish(commit)
    before = published.state
    expected_commit = clean.round(before, proposer, stops)

    faulty = orchestrator(proposer, faults=FaultAt(point))
    with pytest.raises(InjectedFault):
        commit = faulty.round(before, proposer, stops)
        published.publish(commit)
    assert published.state == before  # nothing leaked: output, KV length, RNG counter, generation

    retried = faulty.round(published.state, proposer, stops)  # same round index: same draws
    assert retried == expected_commit
    published.publish(retried)
    assert published.state == expected_commit.successor


def test_publishing_twice_appends_once_and_stale_commits_are_refused():
    run = orchestrator(ModelDraft(DRAFT, SamplingSettings()))
    stops = run.stop_policy(len(PROMPT))
    published = PublishedState(RequestState.start(PROMPT, 3))
    start = published.state
    commit = run.round(start, run.proposer, stops)
    after = published.publish(commit)
    assert published.publish(commit) == after  # idempotent acknowledgement
    assert after.context == PROMPT + commit.emitted
    assert after.committed_kv == len(after.context) - 1
    assert after.round_index == start.round_index + 1

    # A different commit staged from the same (now stale) start must not apply.
    other = replace(
        commit,
        emitted=commit.emitted + (0,),
        successor=replace(commit.successor, context=commit.successor.context + (0,)),
    )
    with pytest.raises(StalePublication):
        published.publish(other)
    assert published.state == after


def champion_alone_output(temperature):
    streamed, end = collect(orchestrator(NoProposer(), temperature=temperature).generate(PROMPT))
    return streamed


@pytest.mark.parametrize("point", list(FaultPoint), ids=lambda p: p.value)
def test_failure_before_first_token_falls_back_silently_to_champion_alone(point):
    run = orchestrator(PromptLookup(), faults=FaultAt(point, occurrence=1), temperature=0)
    streamed, end = collect(run.generate(PROMPT))
    assert end.reason == "length"
    assert end.stats.fallback_code == "INJECTED"
    assert end.stats.error_code is None
    assert streamed == champion_alone_output(0)  # greedy: the very same answer


@pytest.mark.parametrize("point", list(FaultPoint), ids=lambda p: p.value)
def test_failure_after_output_ends_the_answer_visibly_without_duplicates(point):
    run = orchestrator(
        ModelDraft(DRAFT, SamplingSettings(temperature=0)), faults=FaultAt(point, occurrence=3), temperature=0
    )
    streamed, end = collect(run.generate(PROMPT))
    assert end.reason == "error"
    assert end.stats.error_code == "INJECTED"
    assert end.stats.fallback_code is None
    assert 0 < len(streamed) < 24
    assert streamed == end.state.output  # the streamed text is exactly what was published, once
    assert champion_alone_output(0)[: len(streamed)] == streamed


def test_cancellation_discards_the_round_in_flight():
    cancel = CancelToken()
    run = orchestrator(
        ModelDraft(DRAFT, SamplingSettings()),
        faults=FaultAt(FaultPoint.AFTER_STAGE_OUTPUT, occurrence=2, action=cancel.cancel),
    )
    streamed, end = collect(run.generate(PROMPT, cancel=cancel))
    assert end.reason == "cancelled"
    assert streamed == end.state.output
    assert end.stats.rounds == 1  # round 2 was staged, then cancelled before publication
    assert end.state.round_index == 1


def test_cancel_between_rounds_from_the_consumer():
    cancel = CancelToken()
    run = orchestrator(PromptLookup(), temperature=0)
    events = []
    for event in run.generate(PROMPT, cancel=cancel):
        events.append(event)
        if isinstance(event, Emitted):
            cancel.cancel()
    streamed, end = collect(events)
    assert end.reason == "cancelled" and len(streamed) >= 1
    assert champion_alone_output(0)[: len(streamed)] == streamed


class LyingChampion(ReferenceChampion):
    """Returns an out-of-contract decision on its n-th call (a corrupted readback)."""

    def __init__(self, model, bad_call):
        super().__init__(model)
        self.bad_call = bad_call

    def verify(self, request):
        decision = super().verify(request)
        if self.calls == self.bad_call:
            return replace(decision, accepted=len(request.drafts) + 1)
        return decision


@pytest.mark.parametrize("bad_call, reason", [(1, "length"), (3, "error")])
def test_out_of_contract_verify_results_never_reach_the_output(bad_call, reason):
    config = GenerationConfig(max_new_tokens=24, k=3, settings=SamplingSettings(temperature=0), seed=1)
    run = Orchestrator(LyingChampion(MODEL, bad_call), PromptLookup(), config, lambda t: bytes([97 + t]))
    streamed, end = collect(run.generate(PROMPT))
    assert end.reason == reason
    assert (end.stats.fallback_code if bad_call == 1 else end.stats.error_code) == "VERIFY_RESULT"
    assert champion_alone_output(0)[: len(streamed)] == streamed
