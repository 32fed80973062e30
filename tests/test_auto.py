"""The auto scheduler's policy (proposers/auto.py): the cost formula, its adaptation, failures.

Exactness of auto is tested with the other proposers: exhaustive enumeration and greedy identity with
arbitrary context-based choices (tests/policies.py) and with CostPolicy; χ² and reproducibility through
the engine in test_engine.py.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from pyodide_app import costs as costs_module
from pyodide_app.acceptance import Decision
from pyodide_app.costs import (
    EXTRA_SWEEPS,
    LIVE_MAX_AGE,
    LIVE_MIN_ROUNDS,
    LIVE_WINDOW,
    LONG_CONTEXT,
    MIN_PACE,
    ROW_MIN_PAIRS,
    LiveCosts,
    RoundTiming,
    cost_kind,
    fixed_costs,
    interpolate,
    key_length,
    measure_costs,
    measure_key_ms,
)
from pyodide_app.errors import DraftRuntimeError
from pyodide_app.processors import SamplingSettings
from pyodide_app.proposers.auto import (
    LOOKUP_PRIOR,
    NEURAL_TRIES,
    NONE,
    PRIOR_WEIGHT,
    AutoProposer,
    Choice,
    ConfidentExtension,
    CopyLedger,
    CostPolicy,
    LookupLift,
    PositionStats,
    lifted,
)
from pyodide_app.proposers.base import EMPTY_PROPOSAL
from pyodide_app.proposers.neural import AcceptanceByEntropy, NeuralProposer
from pyodide_app.proposers.prompt_lookup import PromptLookup, point_masses
from pyodide_app.transaction import RequestState, RoundCommit
from pyodide_app.waits import finish

from .test_neural_stop import ScriptedRuntime

FLAT = fixed_costs([10.0] * 9, 1.0)  # extra rows cost nothing: drafting pays whenever it may be right
STEEP = fixed_costs([10.0 * t for t in range(1, 10)], 1.0)  # every row costs a full forward: never draft
REPETITIVE = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]  # a 3-gram match continued by 8, 9, 5, ...


def test_expected_tokens_is_the_sum_of_survival_probabilities():
    stats = PositionStats(0.5)
    assert stats.expected_tokens(0) == 1.0
    assert stats.expected_tokens(3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    stats.record(proposed=3, accepted=1)  # position 0 accepted, position 1 rejected, position 2 never tested
    w = PRIOR_WEIGHT
    assert stats.rate(0) == pytest.approx((1 + 0.5 * w) / (1 + w))
    assert stats.rate(1) == pytest.approx((0 + 0.5 * w) / (1 + w))
    assert stats.rate(2) == pytest.approx(0.5)  # untested: the prior
    stats.record(proposed=2, accepted=2)  # both accepted (the bonus follows)
    assert stats.reached == [2, 2] and stats.accepted == [2, 1]


def test_later_positions_have_their_own_prior():
    """A lookup match's first token is the gamble; once it was right, the copy usually goes on."""
    stats = PositionStats(0.2, 0.6)
    assert [stats.rate(j) for j in range(3)] == pytest.approx([0.2, 0.6, 0.6])
    assert stats.expected_tokens(2) == pytest.approx(1 + 0.2 + 0.2 * 0.6)
    assert all(first <= later for first, later in LOOKUP_PRIOR.values())


def test_copies_that_pass_lift_every_match_lengths_prior():
    """LookupLift pools lookup's rounds over match lengths: at 1 before any, its odds ratio (Beta-smoothed
    on both sides) scales each length's prior. Rows at 0.2 of a forward each: a fresh policy does not copy
    after a 1-token match (prior 0.15); after a dozen 3-token copies that all passed it copies several tokens
    there; after 20 whose first token failed it no longer copies after a 4-token match (prior 0.75) either.
    Fails with the lift left out of the rate, or counting the lift's expectations from the lifted priors."""
    assert LookupLift().odds() == 1.0 and lifted(0.4, 1.0) == pytest.approx(0.4)
    assert lifted(0.5, 3.0) == pytest.approx(0.75)
    costs = fixed_costs([10.0 + 2.0 * t for t in range(9)], None)
    continuation = (4, 5, 6, 7)
    good, bad, fresh = (CostPolicy(costs, probe_tolerance=0.0) for _ in range(3))
    assert fresh.choose([0], 4, (1, continuation), False) == NONE
    assert fresh.choose([0], 4, (4, continuation), False).source == "prompt_lookup"
    for _ in range(12):
        good.observe(Choice("prompt_lookup", 2, 3), 2, 2)
    for _ in range(20):
        bad.observe(Choice("prompt_lookup", 2, 3), 2, 0)
    w = 2.0
    assert good.lift.tested == 24 and good.lift.expected == pytest.approx(12 * (0.7 + 0.8))
    assert good.lift.odds() == pytest.approx(((24 + w) / w) / ((18 + w) / (6 + w)))
    assert bad.lift.tested == 20 and bad.lift.expected == pytest.approx(20 * 0.7)
    copied = good.choose([0], 4, (1, continuation), False)
    assert copied.source == "prompt_lookup" and copied.k >= 3
    assert bad.choose([0], 4, (4, continuation), False) == NONE
    later = good.learned()  # the lift goes on with the conversation, as a copy
    later.lift.tested += 1
    assert good.lift.tested == 24 and CostPolicy(costs, earlier=later).lift.tested == 25


def test_the_copy_ledger_scores_what_lookup_would_have_drafted_where_it_did_not():
    """Each answer position opens the round lookup would have drafted there; it is reported, once, as soon as
    the answer shows its first mismatch or all its tokens (a copied token passes exactly when it is the
    answer's token). A position where lookup did draft is counted by its real round, not again. Fails with
    the mismatch search off by one, with positions inside a round's emitted tokens skipped, or with drafted
    rounds counted twice."""
    matcher = PromptLookup(n_max=6, n_min=1)
    ledger = CopyLedger(matcher)
    prompt = [7, 8, 9, 4, 7]  # ends in a 1-token match of 7, continued by 8, 9, 4, 7
    assert ledger.settle(prompt, 4, matcher.match(prompt, 4)) == []  # prompt positions are not scored
    answer = prompt + [8, 9, 5]  # one round emitted all three: positions 5, 6, 7 are scored
    decided = ledger.settle(answer, 4, matcher.match(answer, 4))
    assert decided == [(1, 4, 2), (2, 4, 1), (3, 4, 0)]  # 7 -> 8 9 pass; 7 8 -> 9 passes, 4 fails; 7 8 9 -> 4 fails
    assert ledger.open == [] and ledger.settle(answer, 4, None) == []  # answer ends in 5: no match, no round
    drafted = CopyLedger(matcher)
    drafted.settle(prompt, 4, matcher.match(prompt, 4))
    drafted.drafted()  # lookup drafted at position 5: its own round counts it
    assert drafted.settle(answer, 4, None) == [(2, 4, 1), (3, 4, 0)]
    copying = CopyLedger(matcher)
    copying.settle(prompt, 2, matcher.match(prompt, 2))
    assert copying.settle(prompt + [8], 2, matcher.match(prompt + [8], 2)) == []  # 8 passed; 9 not seen yet
    assert copying.settle(prompt + [8, 9], 2, None) == [(1, 2, 2)]  # both of its two tokens passed


def test_auto_learns_copying_from_rounds_that_did_not_draft_it():
    """An answer that copies its prompt, with rows priced so that no match length's prior pays (a 6-token
    match's 0.95 needs 0.97) and no probes: before version 21 auto learned lookup only from lookup rounds,
    so it chose none on every round. The CopyLedger scores what lookup would have drafted at each position
    none emitted, and once those copies passed, auto drafts them. (Seen failing with the ledger's outcomes
    left out of the counts: none on all 40 rounds.)"""
    costs = fixed_costs([10.0 + 9.7 * t for t in range(9)], None)
    policy, matcher = CostPolicy(costs, probe_tolerance=0.0), PromptLookup(n_max=6, n_min=1)
    source = list(range(10, 50))
    context, choices = source + [source[0]], []
    while len(context) < 2 * len(source):
        match = matcher.match(context, 8)
        choice = policy.choose(context, 8, match, False)
        emitted = 1 + (choice.k if choice.source == "prompt_lookup" else 0)  # every copied token passes
        policy.observe(choice, choice.k, emitted - 1)
        context += source[len(context) - len(source) : len(context) - len(source) + emitted]
        choices.append(choice.source)
    assert choices[:6] == ["none"] * 6 and "prompt_lookup" in choices
    assert policy.lookup_stats(6).reached[0] >= 3 and policy.lookup_stats(6).accepted[0] >= 3


def test_a_sampled_round_pays_for_every_row_it_reads():
    """When sampling, each emitted token's row is processed (softmax, top-p): V(T) holds one such row, a
    round emitting E tokens reads E. Leaving the other E - 1 out makes drafting look cheaper than it is."""
    lookup = (3, (8, 9, 5, 6, 7))
    verify = [10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0]
    assert CostPolicy(fixed_costs(verify, None)).choose(REPETITIVE, 1, lookup, False).source == "prompt_lookup"
    # n = 3's first position: 1.7 tokens in 12 + 0.7 * 8 ms is slower than one token in 10 ms
    assert LOOKUP_PRIOR[3][0] == 0.7
    formula_only = CostPolicy(fixed_costs(verify, None, row_ms=8.0), probe_tolerance=0.0)
    assert formula_only.choose(REPETITIVE, 1, lookup, False) == NONE
    assert fixed_costs(verify, None, row_ms=8.0).round_ms(2, 1.7) == pytest.approx(12 + 0.7 * 8)


def test_costs_are_measured_per_kind_of_sampling():
    assert cost_kind(SamplingSettings(temperature=0, top_p=0.5)) == "greedy"
    assert cost_kind(SamplingSettings(temperature=0.7)) == "sampled"
    assert cost_kind(SamplingSettings(temperature=1.3, top_p=0.9)) == "sampled+top_p"
    assert cost_kind(SamplingSettings(temperature=0.7, top_p=0.9, top_k=40)) == "sampled+top_k+top_p"


def test_cost_interpolation_between_measured_rows():
    assert interpolate({1: 10.0, 3: 14.0, 9: 26.0}, 9) == (10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0)
    assert interpolate({1: 5.0, 5: 9.0}, 3) == (5.0, 6.0, 7.0)


def test_flat_costs_draft_the_longest_match_and_steep_costs_never_draft():
    lookup = (3, (8, 9, 5, 6, 7))
    flat = CostPolicy(FLAT, neural_prior=0.4).choose(REPETITIVE, 8, lookup, neural_available=True)
    assert flat == Choice("prompt_lookup", 5, 3)  # prior 0.7 beats the neural 0.4; all 5 continuation tokens
    assert CostPolicy(STEEP, neural_prior=0.9).choose(REPETITIVE, 8, lookup, neural_available=True) == NONE


def test_neural_is_chosen_when_no_match_and_dropped_after_rejections():
    policy = CostPolicy(FLAT, neural_prior=0.5)
    first = policy.choose([1, 2, 3], 4, None, neural_available=True)
    # E(k)/(k*1 + 10): k=1 1.5/11, k=2 1.75/12 (best), k=3 1.875/13, k=4 1.9375/14; none 1/10
    assert first == Choice("neural", 2)
    for _ in range(6):
        policy.observe(first, proposed=first.k, accepted=0)
    assert policy.choose([1, 2, 3], 4, None, neural_available=True).k < first.k  # shorter once position 0 fails
    for _ in range(30):
        policy.observe(Choice("neural", 1), proposed=1, accepted=0)
    slow_draft = CostPolicy(fixed_costs([10.0] * 9, 4.0), neural_prior=0.5)
    slow_draft.neural = policy.neural
    assert slow_draft.choose([1, 2, 3], 4, None, neural_available=True) == NONE


def test_a_draft_that_stops_short_counts_the_declined_position_as_a_rejection():
    """The neural proposer's entropy stop can return fewer drafts than auto chose (even none): the position it
    declined yielded nothing, so auto must learn from it, or it keeps paying for empty draft steps."""
    policy = CostPolicy(FLAT, neural_prior=0.5)
    policy.observe(Choice("neural", 1), proposed=0, accepted=0)  # declined at once
    policy.observe(Choice("neural", 3), proposed=1, accepted=1)  # one accepted, then declined
    policy.observe(Choice("neural", 2), proposed=2, accepted=1)  # a real rejection: nothing declined
    assert policy.neural.reached == [3, 2] and policy.neural.accepted == [2, 0]
    for _ in range(30):
        policy.observe(Choice("neural", 1), proposed=0, accepted=0)
    slow_draft = CostPolicy(fixed_costs([10.0] * 9, 4.0), neural_prior=0.5)
    slow_draft.neural = policy.neural
    assert slow_draft.choose([1, 2, 3], 4, None, neural_available=True) == NONE


def test_a_long_match_is_trusted_more_than_a_short_one():
    """Measured: a copy after a 6-token match is right 95% of the time, after a 3-token match 70% (long
    documents repeat short phrases with other continuations). With rows at 0.7 of a forward, only the long
    match pays; a prior flat in n (policy version 2 stopped at n = 3) drafts both or neither."""
    policy = CostPolicy(fixed_costs([10.0 + 7.0 * t for t in range(9)], None), probe_tolerance=0.0)
    continuation = (1, 2, 3, 4, 5)
    assert policy.choose([0], 5, (3, continuation), False) == NONE
    long_match = policy.choose([0], 5, (6, continuation), False)
    assert long_match.source == "prompt_lookup" and long_match.bucket == 6 and long_match.k >= 2
    assert AutoProposer(policy, None).lookup.n_max == max(LOOKUP_PRIOR) == 6


def test_lookup_statistics_are_kept_per_match_length():
    policy = CostPolicy(fixed_costs([10.0, 13.0, 16.0, 19.0, 22.0, 25.0, 28.0, 31.0, 34.0], None), probe_tolerance=0)
    long_match, short_match = (3, (1, 2, 3)), (1, (1, 2, 3))
    assert policy.choose([0], 3, long_match, False).source == "prompt_lookup"
    assert policy.choose([0], 3, short_match, False) == NONE  # prior 0.15 does not pay for 0.3 of a forward
    for _ in range(20):
        policy.observe(Choice("prompt_lookup", 3, 1), proposed=3, accepted=3)
    assert policy.choose([0], 3, short_match, False).source == "prompt_lookup"  # n = 1 matches proved right
    assert policy.lookup[3].reached == []  # the n = 3 statistics were not touched
    assert set(policy.lookup) == set(LOOKUP_PRIOR)


def test_an_untried_match_length_gets_one_cheap_probe():
    """With the prior 0.15 a 1-token match never pays by the formula alone, so auto, which learns a match
    length's rate only from rounds that draft after it, could never find out that a text's 1-token matches
    are right (the page's repetitive stratum: lookup-adaptive 1.59x, auto 1.23x). Where a one-token round
    is predicted less than 10% slower than none, an untried n gets one; its outcome decides the rounds after
    it; where a row costs a forward, it gets none."""
    page = fixed_costs([71.2, 84.7, 98.2, 108.9, 119.6, 128.5, 137.4, 146.2, 155.1], None)  # greedy, Firefox
    short = (1, (1, 2, 3))
    assert CostPolicy(page, probe_tolerance=0).choose([0], 4, short, False) == NONE  # the formula alone
    assert CostPolicy(page).choose([0], 4, short, False) == Choice("prompt_lookup", 1, 1)  # 1.15/84.7 vs 1/71.2
    failed, right = CostPolicy(page), CostPolicy(page)
    failed.observe(Choice("prompt_lookup", 1, 1), proposed=1, accepted=0)
    right.observe(Choice("prompt_lookup", 1, 1), proposed=1, accepted=1)
    assert failed.choose([0], 4, short, False) == NONE
    assert right.choose([0], 4, short, False).source == "prompt_lookup"
    assert CostPolicy(STEEP).choose(REPETITIVE, 4, short, False) == NONE


def test_an_untried_match_length_is_probed_against_the_draft_too():
    """Where the neural draft wins by its prior (0.345) a 1-token match (prior 0.15) never won by the formula, and
    the probe ran only when none won, so auto never learned a summary's 1-token matches were right (the page's
    CPU path, greedy: summary auto 1.35x with 7 neural rounds, lookup-adaptive 1.64x). Policy 8 probes an untried
    length against the winner's rate; once tried, the estimate decides. (Seen failing with policy 7's probe,
    which compared against none only when none won.)"""
    page_cpu = fixed_costs([47.0, 53.52, 57.82, 69.35, 80.88, 91.215, 101.55, 111.885, 122.22], 3.1)
    short = (1, (7, 8, 9))
    assert CostPolicy(page_cpu, 0.345, probe_tolerance=0).choose([0], 4, short, True) == Choice("neural", 1)
    assert CostPolicy(page_cpu, 0.345).choose([0], 4, short, True) == Choice("prompt_lookup", 1, 1)
    failed, right = CostPolicy(page_cpu, 0.345), CostPolicy(page_cpu, 0.345)
    failed.observe(Choice("prompt_lookup", 1, 1), proposed=1, accepted=0)
    right.observe(Choice("prompt_lookup", 1, 1), proposed=1, accepted=1)
    assert failed.choose([0], 4, short, True) == Choice("neural", 1)
    assert right.choose([0], 4, short, True).source == "prompt_lookup"


def test_a_neural_draft_gets_several_tries_before_the_formula_alone_decides():
    """The page's CPU path (Firefox, measured V(1) 81.8, V(2) 99.2 ms, draft step 4.4 ms) breaks even at a
    neural acceptance of 0.27; the prior is 0.345. Policy 6 dropped the draft after its first rejection (the
    estimate fell to 0.23) and never tried it again (code: 0.60x neural k = 2). Now a draft whose prior pays
    gets NEURAL_TRIES one-token rounds; a success among them keeps it; all failing ends it; where the prior
    does not pay (a row costing a forward), it gets none. (Seen failing with NEURAL_TRIES = 1, policy 6.)"""
    page_cpu = fixed_costs([81.82, 99.2, 114.12, 126.27, 138.42, 147.46, 156.5, 165.54, 174.58], 4.4)
    policy = CostPolicy(page_cpu, neural_prior=0.345)
    assert policy.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)  # by the formula: 1.345/103.6 > 1/81.8
    for _ in range(NEURAL_TRIES):
        assert policy.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)
        policy.observe(Choice("neural", 1), proposed=1, accepted=0)
    assert policy.choose([1, 2, 3], 4, None, True) == NONE  # three rejections: the formula alone
    recovered = CostPolicy(page_cpu, neural_prior=0.345)
    recovered.observe(Choice("neural", 1), proposed=1, accepted=0)
    assert CostPolicy(page_cpu, 0.345, recovered.learned(), probe_tolerance=0).choose([1], 4, None, True) == NONE
    recovered.observe(recovered.choose([1, 2, 3], 4, None, True), proposed=1, accepted=1)
    assert (
        CostPolicy(page_cpu, 0.345, recovered.learned(), probe_tolerance=0).choose([1], 4, None, True).source
        == "neural"
    )
    assert CostPolicy(STEEP, neural_prior=0.345).choose([1, 2, 3], 4, None, True) == NONE


def test_a_neural_draft_just_short_of_paying_by_its_prior_still_gets_its_tries():
    """bench-p16's sampled costs (V(1) 73.7, V(2) 96.3 ms, r 4.7, D 3.3) price a one-token neural round by the
    0.345 prior 2% slower than none (1.345 / 101.1 ms against 1 / 73.7), so policy 16 never tried the draft on
    sampled code, json and ambiguous prompts (none on 30 of 32 rounds), where its first tokens passed 52-66% and
    hybrid k = 4 ran 1.2-1.5x. Policy 17 tries it where the prior's round is within PROBE_TOLERANCE of none;
    successes keep it; where it is far off (a row costing a forward) it gets no tries, and where its round could
    not pay were its token always right, none (test_flat_costs_...: a 0.9 prior 9.5% short). (Seen failing with
    policy 16's condition, the prior's round beating none.)"""
    sampled = fixed_costs([73.7, 96.3, 109.3, 120.3, 131.3, 142.3, 153.3, 164.3, 175.3], 3.3, row_ms=4.7)
    assert CostPolicy(sampled, 0.345, probe_tolerance=0).choose([1, 2, 3], 4, None, True) == NONE  # formula
    policy = CostPolicy(sampled, neural_prior=0.345)
    assert policy.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)
    for _ in range(2):
        policy.observe(Choice("neural", 1), proposed=1, accepted=1)
    assert policy.choose([1, 2, 3], 4, None, True).source == "neural"  # two successes: the estimate pays
    assert CostPolicy(STEEP, neural_prior=0.345).choose([1, 2, 3], 4, None, True) == NONE


def test_a_neural_draft_that_agrees_drafts_further():
    """With one prior (0.345) for every draft position, a neural round of 2 never won, so position 2 never got a
    count and auto drafted one neural token a round however often the draft was right (the page's CPU path,
    greedy, policy 8: summaries 1.37x where hybrid k = 4 ran 1.66x, json 1.06x where neural k = 2 ran 1.21x).
    Policy 9: a later position's prior is at least position 0's current estimate (drafts agree in streaks:
    teacher-forced 0.38 after an agreement against 0.345 overall; 0.62 against 0.51 in that run), and the
    package's measured later agreement. (Seen failing with streaks off, policy 8's priors.) Costs: that run's."""
    page_cpu = fixed_costs([60.66, 69.1, 77.78, 90.32, 102.86, 113.265, 123.67, 134.075, 144.48], 4.74)

    def after_successes(policy):
        choices = [policy.choose([1, 2, 3], 4, None, True)]
        for _ in range(2):
            policy.observe(choices[-1], proposed=choices[-1].k, accepted=choices[-1].k)
            choices.append(policy.choose([1, 2, 3], 4, None, True))
        return choices

    assert after_successes(CostPolicy(page_cpu, 0.345, neural_later=0.38)) == [
        Choice("neural", 1),
        Choice("neural", 2),
        Choice("neural", 2),
    ]
    stats = PositionStats(0.345, 0.38, streaks=True)
    assert stats.rate(1) == pytest.approx(0.38)  # a_0 = 0.345 < 0.38: the measured later prior
    stats.record(proposed=1, accepted=1)
    assert stats.rate(1) == pytest.approx(stats.rate(0)) and stats.rate(0) > 0.5
    assert PositionStats(0.345, 0.38).rate(1) == pytest.approx(0.38)  # lookup's stats: no streaks
    failing = CostPolicy(page_cpu, 0.345, neural_later=0.38)
    failing.observe(Choice("neural", 1), proposed=1, accepted=1)
    for _ in range(2):  # the second token rejected, twice: its counts take over from the prior
        failing.observe(Choice("neural", 2), proposed=2, accepted=1)
    assert failing.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)


def timed(
    rows: int,
    verify_ms: float,
    read: int = 1,
    context: int = 64,
    steps: int = 0,
    draft_ms: float = 0.0,
    first: bool = False,
):
    return RoundTiming(rows, read, context, verify_ms, steps, draft_ms, first)


def test_live_round_timings_replace_a_measurement_taken_in_a_slow_minute():
    """LiveCosts: a row count's own rounds (less the row processing and context the model adds back) take
    over from the measurement after LIVE_MIN_ROUNDS; an untried row count follows a faster pace, never a
    slower one; a window forgets old rounds; the draft step comes from neural rounds' ms per step."""
    measured = fixed_costs([96.0, 97.0, 100.0], 3.0, row_ms=10.0, key_ms=[0.01, 0.02, 0.025])
    live = LiveCosts(measured)
    assert live.model(key_ms=(0.01, 0.02, 0.025)) == measured
    for ms in (70.0, 68.0):
        live.record(timed(1, ms))
    model = live.model()
    assert model.verify_ms[0] == pytest.approx(96.0 * 69 / 96) and model.verify_ms[2] == pytest.approx(100 * 69 / 96)
    live.record(timed(1, 69.0))
    assert LIVE_MIN_ROUNDS == 3 and live.model().verify(1) == 69.0  # its own median now
    for _ in range(3):  # two rows read (one more processed, 10 ms), 400 tokens before it (336 more, 0.02 ms each)
        live.record(timed(2, 92.0 + 10.0 + 336 * 0.02, read=2, context=400), key_ms=(0.01, 0.02, 0.025))
    assert live.model().verify(2) == pytest.approx(92.0)
    for _ in range(3):  # rounds at a long context are left out (key_ms prices what the context adds)
        live.record(timed(2, 300.0, context=LONG_CONTEXT), key_ms=(0.01, 0.02, 0.025))
    assert live.model().verify(2) == pytest.approx(92.0)
    slower = LiveCosts(measured)
    for _ in range(3):  # rows dearer than measured: an untried smaller row count keeps its measurement
        slower.record(timed(2, 150.0))
    assert slower.model().verify_ms == (96.0, 150.0, 150.0)  # and three rows cost no less than two
    for _ in range(LIVE_WINDOW):  # the machine sped up: the window holds only the recent rounds
        live.record(timed(1, 50.0))
    assert live.model().verify(1) == 50.0 and live.rounds() == LIVE_WINDOW + 3
    assert live.model().draft_step_ms == 3.0
    for _ in range(3):
        live.record(timed(3, 100.0, steps=2, draft_ms=9.0))
    assert live.model().draft_step_ms == 4.5 and live.model(key_ms=[0.02]).key_ms == (0.02,)


def test_a_requests_first_round_which_waited_on_the_prefill_is_no_sample_of_v():
    """Policy 22: the WebGPU champion submits the prompt's prefill without waiting, so a request's first verify
    call also waits for it (natively on lavapipe 4.0 s for a 57-token prompt, against V(2) 182 ms). Two such
    2-row rounds and one true one set the live V(2) at 3,962 ms, and auto played none on every round of the
    requests after (a summary it drafts on 17 of 21 rounds from a fresh engine). First rounds are not learned."""
    measured = fixed_costs([150.0, 182.0, 215.0, 246.0, 277.0], 2.5)
    policy = CostPolicy(measured, 0.345, live=LiveCosts(measured))
    for _ in range(2):  # two requests
        policy.observe(Choice("neural", 1), 1, 1, timed(2, 4000.0, read=2, first=True))
        policy.observe(Choice("prompt_lookup", 1, 2), 1, 1, timed(2, 210.0, read=2))
    policy.observe(Choice("prompt_lookup", 1, 2), 1, 1, timed(2, 200.0, read=2))
    assert policy.live.rounds() == 3 and policy.costs.verify(2) == 210.0  # the median of 210, 210, 200
    assert policy.choose([1, 2, 3, 1, 2], 4, (2, (3, 1, 2)), True).source == "prompt_lookup"


def test_a_row_price_learned_too_high_never_prices_a_verify_call_at_zero():
    """A busy host's load measured row_ms 17.4 ms (native CPU, 2026-12-07; ~0-1 ms in a quiet minute). A 9-row round
    that read all 9 rows in 60 ms was then a V(9) sample of 60 - 8 * 17.4 < 0: the pace went negative, every V(T)
    without live samples to 0, and none's rate 1 / V(1) divided by zero, an INTERNAL error that ended the answer.
    A live V(T), and each sample or pace, stays at least MIN_PACE of its measurement."""
    measured = fixed_costs([40.0, 42.0, 44.0, 46.0, 48.0, 50.0, 52.0, 54.0, 56.0], 2.0, row_ms=17.4)
    policy = CostPolicy(measured, 0.345, live=LiveCosts(measured))
    policy.observe(Choice("neural", 1), 8, 8, timed(9, 60.0, read=9, steps=8, draft_ms=16.0))
    assert policy.costs.verify(1) == pytest.approx(MIN_PACE * 40.0)
    assert policy.choose([1, 2, 3], 8, None, True) is not None  # priced, not divided by zero
    for _ in range(LIVE_MIN_ROUNDS):
        policy.observe(Choice("neural", 1), 8, 8, timed(9, 60.0, read=9, steps=8, draft_ms=16.0))
    assert policy.costs.verify(9) == pytest.approx(MIN_PACE * 56.0)


def test_row_ms_is_learned_from_rounds_of_one_row_count_that_read_different_numbers_of_rows():
    """Policy 20: a 2026-12-07 WebGPU load measured row_ms 21.4 ms where a read row costs ~0 there; taken off
    every accepted 2-row round it put the live V(2) below V(1). Once ROW_MIN_PAIRS pairs of rounds of one request
    and one T read different numbers of rows, row_ms is the median of their differences per row read, and V(T)
    the median of its samples less their rows' share; before, the measurement. A row dearer than measured (the CPU
    path's sampled softmax) is learned too, from reads that are not adjacent (1 and 3 of 3 rows)."""
    noisy = LiveCosts(fixed_costs([53.0, 55.0, 57.0], 3.0, row_ms=21.4))
    noisy.record(timed(1, 53.0, first=True))
    noisy.record(timed(2, 53.4, read=1))
    for _ in range(ROW_MIN_PAIRS - 1):  # each 2-read round pairs with the one 1-read round
        noisy.record(timed(2, 53.4, read=2))
    assert noisy.model().row_ms == 21.4
    noisy.record(timed(2, 53.4, read=2))
    assert noisy.model().row_ms == 0.0 and noisy.model().verify(2) == 53.4
    dearer = LiveCosts(fixed_costs([60.0, 62.0, 64.0], 3.0, row_ms=5.0))
    dearer.record(timed(1, 60.0, first=True))
    for _ in range(4):
        for timing in (timed(2, 62.0), timed(2, 87.0, read=2), timed(3, 64.0), timed(3, 114.0, read=3)):
            dearer.record(timing)
    assert dearer.model().row_ms == 25.0 and dearer.model().verify_ms == (60.0, 62.0, 64.0)
    for _ in range(LIVE_MAX_AGE):  # the reads age out with the rounds: back to the measurement
        dearer.record(timed(1, 60.0))
    assert dearer.model().row_ms == 5.0


def test_row_ms_compares_rounds_of_one_request_not_a_faster_minute_with_a_slower_one():
    """Policy 24. A page bench (bench-copy, 2026-12-08): none's speed on one prompt ranged 20-28 tok/s between
    repeats, and summaries, whose rounds read many rows, learned row_ms up to 16 ms across requests where the rounds
    within one answer show 0 +- 0.5 ms; priced so, auto drafted one or two copied tokens a round. Here a request in
    a fast minute reads 1 row of its 3-row rounds but twice reads 3, and one in a slow minute mostly reads 3: within
    each a read row is free, across them it looks 6 ms dear. A 300 ms round (a garbage collection) sets no price."""
    measured = fixed_costs([38.0, 44.0, 50.0, 56.0, 62.0], 3.0)
    live = LiveCosts(measured)
    live.record(timed(1, 40.0, first=True))
    for read in (1, 1, 1, 1, 1, 1, 3, 3):
        live.record(timed(3, 50.0, read=read))
    live.record(timed(1, 52.0, first=True))
    for read in (1, 3, 3, 3, 3, 3, 3, 3):
        live.record(timed(3, 62.0, read=read))
    live.record(timed(3, 300.0, read=3))
    assert live.model().row_ms == 0.0
    policy = CostPolicy(measured, 0.345, live=live)
    policy.observe(NONE, 0, 0, timed(1, 40.0))
    context, match = [5, 6, 7, 8, 9, 5, 6, 7], (2, (8, 9, 5, 6))  # a 2-token match: at 6 ms a row, k = 2
    assert policy.choose(context, 4, match, False) == Choice("prompt_lookup", 4, 2)


def test_a_live_timing_expires_so_a_row_count_priced_in_a_slow_minute_gets_tried_again():
    """Policy 13: 2-row rounds timed in a busy minute (90 ms against V(1) 50) make none win; none's rounds then
    never time two rows again, so without expiry V(2) stayed 90 for good (a page bench held it at 82 ms for
    the rest of the run while V(1) came back to 45). After LIVE_MAX_AGE rounds those samples are dropped:
    V(2) is its measurement at the recent pace, and the neural draft wins again."""
    measured = fixed_costs([50.0, 52.0, 54.0, 56.0, 58.0], 3.0)
    policy = CostPolicy(measured, 0.345, live=LiveCosts(measured))
    for accepted in (0, 0, 1):  # about the prior's rate
        policy.observe(Choice("neural", 1), 1, accepted, timed(2, 90.0, read=1 + accepted, steps=1, draft_ms=3.0))
    assert policy.costs.verify(2) == 90.0 and policy.choose([1, 2, 3], 4, None, True) == NONE
    for _ in range(LIVE_MAX_AGE - 3):
        policy.observe(NONE, 0, 0, timed(1, 50.0))
    assert policy.costs.verify(2) == 90.0  # the first 2-row sample is LIVE_MAX_AGE - 1 rounds old
    policy.observe(NONE, 0, 0, timed(1, 50.0))
    assert policy.costs.verify(2) == 52.0 and policy.costs.verify(1) == 50.0
    assert policy.live.rounds() == LIVE_WINDOW + 2  # the 1-row window, the two young 2-row samples
    assert policy.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)


def test_auto_stops_drafting_when_live_rounds_show_rows_dearer_than_measured():
    """A measurement that made a second row nearly free (52 vs 50 ms) has auto draft neurally; rounds of two
    rows that take 80 ms move V(2) to 80, and none wins. Without live refinement the draft would go on."""
    measured = fixed_costs([50.0, 52.0, 54.0, 56.0, 58.0], 3.0)
    policy = CostPolicy(measured, 0.345, live=LiveCosts(measured))
    fixed = CostPolicy(measured, 0.345)
    for _ in range(3):
        for each in (policy, fixed):
            assert each.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)
    for accepted in (1, 0, 0):  # about the prior's rate
        for each in (policy, fixed):
            each.observe(Choice("neural", 1), 1, accepted, timed(2, 80.0, read=1 + accepted, steps=1, draft_ms=3.0))
    assert policy.costs.verify(2) == 80.0 and policy.costs.verify(1) == 50.0
    assert policy.choose([1, 2, 3], 4, None, True) == NONE
    assert fixed.choose([1, 2, 3], 4, None, True) == Choice("neural", 1)


def test_a_long_context_makes_every_verified_row_dearer():
    """Each verified row attends to the whole context, so at 1,700 tokens a row costs more than V(T) timed
    after 64 tokens says (the page's long-context stratum: auto 0.77x champion-alone on WebGPU, drafting 8
    tokens of 3-gram matches whose rows cost more than they could win). Rates use V(T) + extra * key_ms[T - 1]."""
    verify = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0]
    match = (3, (1, 2, 3, 4, 5, 6, 7, 8))
    short, long = [0] * 64, [0] * 1700
    costs = fixed_costs(verify, None, key_ms=[0.01 * rows for rows in range(1, 10)])
    assert costs.verify(3, 1700) == pytest.approx(12.0 + 3 * (1700 - 64) * 0.01)
    assert costs.verify(3) == costs.verify(3, 10) == 12.0  # no extra below the measured 64 tokens
    assert costs.verify(12, 1700) == pytest.approx(18.0 + 9 * (1700 - 64) * 0.01)  # beyond T_max: T_max's
    unmeasured = CostPolicy(fixed_costs(verify, None))
    assert unmeasured.choose(long, 8, match, False) == unmeasured.choose(short, 8, match, False)
    at_short = CostPolicy(costs).choose(short, 8, match, False)
    assert at_short == Choice("prompt_lookup", 6, 3)
    assert CostPolicy(costs).choose(long, 8, match, False) == Choice("prompt_lookup", 1, 3)  # 1.7/43.7 vs 1/26.4


def test_a_long_context_that_costs_each_call_more_than_each_row_leaves_drafting_worth_it():
    """Policy 16 (the shape policy 15 tried): the context's price is per T-row call, not per row. On the page's
    CPU path at ~1,700 tokens a 1-row call took 65 ms more than at 64 tokens and a 5-row call 130: beside none's
    dearer row, eight drafted tokens at a 3-gram match pay. Policy 14's one slope per row (measured 0.0109 ms per
    row per token: 18 ms for 1 row, 89 for 5) drafted one token there, and sampled auto ran 0.82x lookup-adaptive
    on that stratum."""
    verify = [36.0, 41.0, 50.0, 58.0, 66.0, 73.0, 80.0, 88.0, 95.0]
    tokens = 1700 - 64
    per_call = fixed_costs(verify, None, key_ms=[e / tokens for e in (65, 106, 120, 125, 130, 130, 130, 130, 130)])
    per_row = fixed_costs(verify, None, key_ms=[0.0109 * rows for rows in range(1, 10)])
    match, long = (3, (1, 2, 3, 4, 5, 6, 7, 8)), [0] * 1700
    assert CostPolicy(per_call).choose(long, 8, match, False) == Choice("prompt_lookup", 8, 3)
    assert CostPolicy(per_row).choose(long, 8, match, False) == Choice("prompt_lookup", 1, 3)


OWN_TOKEN = 7  # ClockedChampion's greedy token after any context


class ClockedChampion:
    """A champion whose verify call n (1, 2, ...) moves a fake clock (installed as costs.time.perf_counter)
    on by cost_ms(request, n)."""

    def __init__(self, monkeypatch, cost_ms, context_limit: int = 2048):
        self.now, self.calls, self.cost_ms, self.context_limit = 0.0, 0, cost_ms, context_limit
        monkeypatch.setattr(costs_module.time, "perf_counter", lambda: self.now)

    def prefill(self, tokens):
        return None

    def verify(self, request):
        self.calls += 1
        self.now += self.cost_ms(request, self.calls) / 1000
        return Decision(0, OWN_TOKEN, "correction")  # its greedy token: OWN_TOKEN

    def forget(self):
        pass


def test_key_ms_is_each_row_counts_verify_time_per_context_token(monkeypatch):
    """measure_key_ms at L tokens: per measured T, (V(T) after L tokens - V(T) after 64) / (L - 64), interpolated
    between them. The fake champion takes 5 ms per call + 2 ms per row + per context token 0.03 ms per call and
    0.01 ms per row (a per-row fit through T = 1 and 9, policy 14's, gives 0.0137 for every row instead)."""

    def cost_ms(request, call):
        rows = len(request.drafts) + 1
        return 5 + 2 * rows + len(request.context) * (0.03 + 0.01 * rows)

    measured = finish(measure_key_ms(ClockedChampion(monkeypatch, cost_ms), 9, 1448))
    assert measured == pytest.approx([0.03 + 0.01 * rows for rows in range(1, 10)])


def test_key_ms_is_measured_at_the_prompts_own_length(monkeypatch):
    """Where a context token costs less the longer the context (as on the page's CPU path: 0.068 ms per token
    for a 1-row call at 512 tokens, ~0.040 at 1,700), a 512-token measurement overprices a 1,700-token call
    (policy 15: 111 ms where it took 65), so the measurement is taken at the prompt's key length. The fake
    champion's context costs 40 ms per call plus 0.04 ms per token beyond 64."""

    def call_ms(context: int) -> float:
        return 10 + (40 + 0.04 * (context - 64) if context > 64 else 0)

    champion = ClockedChampion(monkeypatch, lambda request, call: call_ms(len(request.context)))
    at_512 = fixed_costs([10.0], None, key_ms=finish(measure_key_ms(champion, 1, 512)))
    at_1448 = fixed_costs([10.0], None, key_ms=finish(measure_key_ms(champion, 1, 1448)))
    assert at_1448.verify(1, 1700) == pytest.approx(call_ms(1700), rel=0.08)  # 123 ms for a real 115
    assert at_512.verify(1, 1700) > 1.8 * call_ms(1700)  # 221 ms


def test_key_ms_never_falls_with_more_rows(monkeypatch):
    """A noisy long-context timing where 3 rows add less than 2 (as if fewer keys were read) is raised to the
    2-row price: a call of more rows reads the context at least as often."""

    def cost_ms(request, call):
        rows = len(request.drafts) + 1
        per_token = {1: 0.03, 2: 0.05, 3: 0.04}.get(rows, 0.06)
        return 5 + 2 * rows + (len(request.context) - 64) * per_token

    measured = finish(measure_key_ms(ClockedChampion(monkeypatch, cost_ms), 5, 512))
    assert measured == pytest.approx([0.03, 0.05, 0.05, 0.055, 0.06])


def test_key_length_is_the_longest_measured_length_the_prompt_reaches():
    """Key lengths are 512 * sqrt(2)^j (512, 724, 1024, 1448, 2048, ...): a request is priced from the largest
    its prompt reaches that the context holds with t_max rows after; below LONG_CONTEXT, none."""
    assert LONG_CONTEXT == 512
    assert key_length(511, 2048, 9) is None and key_length(512, 2048, 9) == 512
    assert key_length(723, 2048, 9) == 512 and key_length(724, 2048, 9) == 724
    assert key_length(1447, 2048, 9) == 1024 and key_length(1700, 2048, 9) == 1448
    assert key_length(2040, 2048, 9) == 1448  # 2,048 + 9 rows do not fit a 2,048-token context
    assert key_length(3000, 4096, 9) == 2896 and key_length(600, 515, 9) is None


def test_a_sampled_rows_cost_is_timed_beside_the_greedy_call_it_is_compared_with(monkeypatch):
    """row_ms = V_sampled(1) - V_greedy(1). Timed in separate passes, machine drift lands in the difference:
    in a page run the greedy pass ran 17 ms faster than the sampled one before it and row_ms came out 27 ms
    (sampled 98.5 ms, greedy 88.0 ms at T = 1 in the same cost model). Here every call is 2 ms faster than the
    one before (a warming runtime) and a sampled row costs 5 ms more: timed side by side, the difference is
    5 ms and one call's drift (the greedy call runs right after the sampled one): 7 ms."""

    def cost_ms(request, call):
        return 200 - 2 * call + (0 if request.settings.greedy else 5) + len(request.drafts)

    champion = ClockedChampion(monkeypatch, cost_ms)
    costs = finish(measure_costs(champion, None, 9, SamplingSettings(temperature=0.7)))
    assert costs.row_ms == pytest.approx(7.0)


@pytest.mark.parametrize("sampled", [False, True])
def test_reading_a_further_row_costs_its_processing_greedy_or_sampled(monkeypatch, sampled):
    """row_ms includes one greedy row's processing (the CPU path's pass over the row in Python): a 2-row call
    whose draft is the champion's own token reads both rows; timed beside one whose draft is rejected. Here a
    read row costs 4 ms, and a sampled one 5 ms more: row_ms 4 greedy, 9 sampled."""

    def cost_ms(request, call):
        own = bool(request.drafts) and request.drafts[0] == OWN_TOKEN
        return 50 + 10 * len(request.drafts) + 4 * own + (0 if request.settings.greedy else 5)

    settings = SamplingSettings(temperature=0.7) if sampled else SamplingSettings(temperature=0)
    costs = finish(measure_costs(ClockedChampion(monkeypatch, cost_ms), None, 9, settings))
    assert costs.row_ms == pytest.approx(9.0 if sampled else 4.0)
    assert costs.verify_ms[:2] == pytest.approx((50.0 + 5 * sampled, 60.0 + 5 * sampled))


def test_a_sweep_whose_times_do_not_rise_with_rows_is_swept_again(monkeypatch):
    """A busy neighbour slows the first sweeps' 1-row calls (90 ms, then 70; each row 10 ms more): in three
    sweeps each 2-row call ran 10 ms under its sweep's 1-row call, so V(2) < V(1), and the sweep is repeated
    until the median excess over the 1-row call comes out at +10 (four more: 3 slow sweeps against 4). With
    the repeat left out, auto would see a second row that is cheaper than the first."""

    def cost_ms(request, call):
        rows = len(request.drafts) + 1
        busy = call <= 1 + 4 * 6  # the own-token call, then the warm-up and three timed sweeps of 6 cases
        return 70 + 10 * (rows - 1) + (20 if busy and rows == 1 else 0)

    champion = ClockedChampion(monkeypatch, cost_ms)
    costs = finish(measure_costs(champion, None, 9, SamplingSettings(temperature=0)))
    assert costs.verify_ms[:3] == pytest.approx((70.0, 80.0, 90.0))
    assert champion.calls == 1 + (1 + 3 + 4) * 6


def test_rows_are_priced_by_their_excess_over_the_1_row_call_of_the_same_sweep(monkeypatch):
    """Rows 1.5 ms apart on a machine whose pace swings by up to 3 ms from sweep to sweep (every call of a
    sweep alike), and a 2 ms hiccup on the 1-row call of the quietest sweep. Each call's best over the sweeps
    then comes from a different sweep: V(1) 41 from the second-quietest, V(2) 41.5 from the quietest, a
    second row priced at 0.5 ms (a 2026-12-04 native sampled sweep came out flat, V(1) = V(2) = V(3)). Each
    T's median excess over the 1-row call of its own sweep is its rows' cost: 1.5 ms a row."""
    pace = [0, 0, 3, 1]  # ms every call of a sweep takes more (sweep 0: the warm-up)

    def cost_ms(request, call):
        sweep = (call - 2) // 6  # call 1: the own-token call; then sweeps of 6 cases
        rows = len(request.drafts) + 1
        hiccup = 2 if rows == 1 and sweep == 1 else 0
        return 40 + 1.5 * (rows - 1) + pace[sweep] + hiccup

    costs = finish(measure_costs(ClockedChampion(monkeypatch, cost_ms), None, 9, SamplingSettings(temperature=0)))
    v = costs.verify_ms
    assert (v[1] - v[0], v[2] - v[0]) == pytest.approx((1.5, 3.0))


def test_a_flat_cost_curve_ends_its_extra_sweeps_and_never_falls(monkeypatch):
    """Where rows are free (a GPU's V(1) = V(2) = V(3)) the bests never rise strictly: EXTRA_SWEEPS more sweeps,
    then the curve as measured. Where a smaller call stays dearer than a larger one (V(1) 60 against V(2) 50,
    every sweep), V(1) is taken as V(2): a call of fewer rows costs at most one of more."""

    def flat(request, call):
        return 40 + 10 * max(0, len(request.drafts) - 2)

    champion = ClockedChampion(monkeypatch, flat)
    costs = finish(measure_costs(champion, None, 9, SamplingSettings(temperature=0)))
    assert costs.verify_ms[:4] == pytest.approx((40.0, 40.0, 40.0, 50.0))
    assert champion.calls == 1 + (1 + 3 + EXTRA_SWEEPS) * 6

    def falling(request, call):
        return 60 if not request.drafts else 40 + 10 * len(request.drafts)

    costs = finish(measure_costs(ClockedChampion(monkeypatch, falling), None, 9, SamplingSettings(temperature=0)))
    assert costs.verify_ms[:3] == pytest.approx((50.0, 50.0, 60.0))


def test_a_conversations_earlier_counts_carry_into_its_next_answer_and_survive_reset():
    """An answer starts from what the conversation's earlier answers counted (Engine passes them on), and
    the orchestrator's reset at the start of the answer keeps them."""
    costs = fixed_costs([10.0, 13.0, 16.0, 19.0, 22.0, 25.0, 28.0, 31.0, 34.0], None)
    match = (3, (1, 2, 3))
    earlier = CostPolicy(costs)
    for _ in range(10):
        earlier.observe(Choice("prompt_lookup", 3, 3), proposed=3, accepted=0)  # this chat's 3-gram copies fail
    assert CostPolicy(costs).choose([0], 3, match, False).source == "prompt_lookup"  # the prior alone drafts
    learned = earlier.learned()
    assert learned.rounds == 10 and learned.lookup[3].reached == [10]
    carried = CostPolicy(costs, earlier=learned)
    carried.reset()
    assert carried.choose([0], 3, match, False) == NONE and carried.rounds == 10
    carried.observe(Choice("prompt_lookup", 1, 3), proposed=1, accepted=1)
    assert learned.lookup[3].reached == [10] and carried.learned().rounds == 11  # the earlier counts are copies


class FailingDraft:
    name = "neural"

    def __init__(self):
        self.calls = 0

    def propose(self, context, k, round_index, draws):
        self.calls += 1
        raise DraftRuntimeError("onnxruntime failed")

    def reset(self):
        pass

    def pending(self, context):
        return 1


def test_a_failing_draft_becomes_a_plain_step_and_is_not_chosen_again():
    draft = FailingDraft()
    auto = AutoProposer(CostPolicy(FLAT, neural_prior=0.9), draft)
    assert finish(auto.propose([1, 2, 3], 4, 0, None)) == EMPTY_PROPOSAL
    assert auto.neural_failed and draft.calls == 1
    assert finish(auto.propose([1, 2, 3, 4], 4, 1, None)) == EMPTY_PROPOSAL
    assert draft.calls == 1 and auto.last == NONE
    assert auto.summary() == "neural k=4 on 1 round, none on 1 round"
    auto.reset()
    assert not auto.neural_failed and auto.summary() == ""


def test_the_neural_priors_are_the_shipped_drafts_measured_agreements(real_package):
    import json

    from pyodide_app.engine import Engine

    from .conftest import ROOT

    manifest = json.loads((real_package / "manifest.json").read_text())
    provenance = json.loads((ROOT / "build_tools/drafts/smollm2-135m-distilled/provenance.json").read_text())
    # measured on the independent evaluation set (tests/test_draft_eval.py), not the held-out split (~0.5)
    independent = provenance["independent_evaluation"]["greedy_agreement"]
    assert manifest["draft"]["agreement"] == independent < provenance["evaluation"]["overall"] - 0.1
    later = provenance["independent_evaluation"]["greedy_agreement_after_agreement"]
    assert manifest["draft"]["later_agreement"] == later > independent  # agreement runs in streaks
    assert Engine(None, None, None, manifest).neural_priors() == (independent, later)
    assert Engine(None, None, None, {**manifest, "draft": {}}).neural_priors() == (0.4, None)
    # and its acceptance by entropy reaches auto's policy (its neural rounds' extension), None without one
    from pyodide_app.engine import ChatRequest

    request = ChatRequest.from_dict(
        {"messages": [{"role": "user", "content": "hi"}], "speculative": {"proposer": "auto"}}, 8
    )
    champion = SimpleNamespace(context_limit=2048)
    calibration = Engine(champion, None, None, manifest)._proposer(request, [1, 2]).policy.calibration
    assert calibration == AcceptanceByEntropy.from_manifest(manifest["draft"]["acceptance_by_entropy"])
    assert calibration is not None and calibration(0.1) == 0.97
    bare = Engine(champion, None, None, {**manifest, "draft": {}})
    assert bare._proposer(request, [1, 2]).policy.calibration is None


class ShortDraft:
    """A neural draft that proposes one token whatever k (its entropy stop declined the second)."""

    name = "neural"

    def propose(self, context, k, round_index, draws):
        return point_masses((9,))
        yield

    def reset(self):
        pass

    def pending(self, context):
        return 1


class RecordingPolicy:
    def __init__(self, choice):
        self.choice, self.timings = choice, []

    def choose(self, context, k_cap, lookup, neural_available, neural_pending=1):
        return self.choice

    def observe(self, choice, proposed, accepted, timing=None):
        self.timings.append(timing)

    def reset(self):
        pass


def test_each_round_reaches_the_policy_with_its_rows_read_and_draft_steps():
    """AutoProposer turns the orchestrator's commit into the RoundTiming LiveCosts learns from: T = drafts + 1,
    rows read = accepted + 1, the context before the round, and the draft steps run where the round before
    was neural too (a first neural round also feeds the draft what came since its last; a draft that stopped
    short of k ran the step that declined; prompt lookup runs none), and whether it was the request's first
    (whose verify call may also have waited on the prompt's prefill)."""
    policy = RecordingPolicy(Choice("neural", 3))
    auto = AutoProposer(policy, ShortDraft())
    start = RequestState.start((1, 2, 3, 4, 5))
    for context, draft_ms, steps in (([1, 2, 3], 90.0, 0), ([1, 2, 3, 4, 5], 6.0, 2)):  # the first fed the prompt
        finish(auto.propose(context, 3, 0, None))
        auto.observe(RoundCommit(0, 0, 1, 1, (9, 4), start, draft_ms=draft_ms, verify_ms=50.0))
        assert policy.timings[-1] == RoundTiming(2, 2, len(context), 50.0, steps, draft_ms, first=context == [1, 2, 3])
    policy.choice = Choice("prompt_lookup", 2, 2)
    finish(auto.propose([1, 2, 1, 2, 1], 2, 1, None))
    auto.observe(RoundCommit(1, 0, 2, 0, (7,), start, draft_ms=0.1, verify_ms=45.0))
    assert policy.timings[-1] == RoundTiming(3, 1, 5, 45.0, 0, 0.1)
    auto.reset()  # the next request's first round
    finish(auto.propose([1, 2, 1, 2, 1], 2, 0, None))
    auto.observe(RoundCommit(0, 0, 2, 0, (7,), start, draft_ms=0.1, verify_ms=45.0))
    assert policy.timings[-1] == RoundTiming(3, 1, 5, 45.0, 0, 0.1, first=True)


class ClockedDraft:
    """A neural proposer whose proposal moves ClockedChampion's fake clock on by a step's cost (2 ms + 0.01 ms
    per context token) plus 0.3 ms per token it feeds beyond one (its cache: the last context it saw)."""

    def __init__(self, champion):
        self.champion, self.cached = champion, 0

    def propose(self, context, k, round_index, draws):
        fed = len(context) - min(self.cached, len(context) - 1)
        self.champion.now += (2 + 0.01 * len(context) + 0.3 * (fed - 1)) / 1000
        self.cached = len(context) + 1  # the context and its draft
        return point_masses((9,))
        yield

    def forget(self):
        self.cached = 0


def test_the_draft_is_timed_per_step_per_context_token_and_per_token_fed(monkeypatch):
    """time_draft: the step is a later call's time and the feed a fresh cache's first call's excess per token fed
    beyond one; measure_draft_context at L tokens: the step's excess over the short one per token beyond 64
    (the fake draft: 0.01 ms per context token, 0.3 ms per token fed). Fails if the first call (the catch-up)
    were taken as a step, or the step's context cost were left out."""
    champion = ClockedChampion(monkeypatch, lambda request, call: 1.0)
    draft = ClockedDraft(champion)
    step, feed = finish(costs_module.time_draft(draft, 3))
    assert step == pytest.approx(2 + 0.01 * 62, abs=0.02) and feed == pytest.approx(0.3, rel=0.01)
    key, long_feed = finish(costs_module.measure_draft_context(draft, 1448, step))
    assert key == pytest.approx(0.01, rel=0.01) and long_feed == pytest.approx(0.3, rel=0.01)
    measured = finish(measure_costs(champion, draft, 3))
    assert measured.draft_step_ms == pytest.approx(step) and measured.draft_feed_ms == pytest.approx(feed)


LONG_PAGE = fixed_costs([115.3, 139.9, 154.6, 174.3, 194.0], 7.7, key_ms=[0.064, 0.068, 0.068, 0.068, 0.068])


def test_a_long_prompts_draft_catch_up_and_steps_keep_its_neural_tries_off_a_short_answer():
    """Policy 18. bench-p17's long_context stratum (page CPU path, ~1,700-token prompts, 32 tokens an answer):
    auto took its neural tries there, priced at the short context's 7.7 ms a step and no catch-up, where the
    draft fed the prompt in ~1 s and stepped far dearer (neural k = 2 ran 0.81x none). With the catch-up (0.6
    ms a token here) spread over the 32 tokens left by a round chosen on its rate, and shared by the
    NEURAL_TRIES tries of a probe, no neural round is chosen; over 1,000 tokens left the catch-up is a small
    share and the draft wins on its rate; a short prompt's catch-up does not stop it. Fails with policy 17's
    pricing (no catch-up, no step context cost), with the catch-up unspread, or with a probe paying only the
    spread share."""
    long, short = [0] * 1700, [0] * 40
    priced = replace(LONG_PAGE, draft_feed_ms=0.6, draft_key_ms=0.004)
    assert CostPolicy(LONG_PAGE, 0.345).choose(long, 4, None, True, neural_pending=1700).source == "neural"
    answer = CostPolicy(priced, 0.345, answer_end=1700 + 32)
    assert answer.choose(long, 4, None, True, neural_pending=1700) == NONE
    assert answer.choose(short, 4, None, True, neural_pending=40) == Choice("neural", 1)
    long_answer = CostPolicy(replace(priced, draft_key_ms=0.0), 0.345, answer_end=1700 + 1000)
    assert long_answer.choose(long, 4, None, True, neural_pending=1700).source == "neural"


class PendingPolicy(RecordingPolicy):
    def choose(self, context, k_cap, lookup, neural_available, neural_pending=1):
        self.pending = getattr(self, "pending", []) + [neural_pending]
        return self.choice


def test_auto_tells_its_policy_what_the_draft_would_be_fed():
    """A fresh draft cache feeds the whole context in the first neural round; after it, only what the round
    emitted (the tokens the draft has not seen, at least one). Fails if auto passed the context length, or 1."""
    policy = PendingPolicy(Choice("neural", 2))
    auto = AutoProposer(policy, NeuralProposer(ScriptedRuntime([0, 0, 0, 0]), 0.0))
    finish(auto.propose([1, 2, 3, 4, 5], 2, 0, None))  # the draft now holds 1..5 and its drafts 10, 11
    finish(auto.propose([1, 2, 3, 4, 5, 10, 7], 2, 1, None))  # 10 accepted, 7 the correction
    assert policy.pending == [5, 1]


SURE_BELOW_1_BIT = AcceptanceByEntropy((1.0,), (0.9, 0.2))  # 0.9 at or below 1 bit, 0.2 above


def test_a_confident_extension_keeps_a_draft_past_k_while_it_raises_the_rounds_rate():
    """Policy 23. The first k drafts are kept whatever their rows say; draft j >= k while S * p(h_j) tokens for
    extra_ms[j - k] ms (plus reading its row) beat the round's rate, S the calibrated chance the drafts before it
    all passed. Fails if S is left out (an unsure earlier draft does not stop it), if the row's reading is not
    priced, or if the rule drafts past the extra costs it was given (the request's k)."""
    rule = ConfidentExtension(2, SURE_BELOW_1_BIT, rate=0.02, extra_ms=(10.0, 20.0))
    assert rule([5.0]) and rule([5.0, 5.0])  # the choice's own k
    assert rule([0.5, 0.5, 0.5])  # 0.729 tokens for 10 ms: 0.073 a ms
    assert not rule([0.5, 5.0, 0.5])  # 0.9 * 0.2 * 0.9 = 0.162 tokens: 0.016 a ms
    assert not rule([0.5, 0.5, 5.0])
    assert rule([0.5] * 4) and not rule([0.5] * 5)  # 0.656 tokens for 20 ms; then past the request's k
    assert not replace(rule, row_ms=100.0)([0.5, 0.5, 0.5])  # 0.729 / (10 + 72.9)


def test_the_cost_policy_gives_a_neural_round_its_extension_priced_from_the_costs():
    """A neural choice carries the extension when the package has a calibration and the request's k leaves room:
    keeping draft j costs V(j + 2) - V(j + 1) more and one draft step; its rate is the round's. No extension
    without a calibration, at k = the request's k, or for prompt lookup. Fails if extra_ms were the whole
    verify call or left out the draft step."""
    costs = fixed_costs([50, 58, 71, 83, 95], 4.5)
    policy = CostPolicy(costs, 0.6, calibration=SURE_BELOW_1_BIT)
    choice = policy.choose([1, 2, 3], 4, None, True)  # V(T) measured up to T = 5: k at most 4
    assert choice.source == "neural" and 0 < choice.k < 4 and choice == Choice("neural", choice.k)
    rule = choice.extend
    extra = tuple(costs.verify_ms[j + 1] - costs.verify_ms[j] + 4.5 for j in range(choice.k, 4))
    assert rule.k == choice.k and rule.extra_ms == pytest.approx(extra) and rule.acceptance is SURE_BELOW_1_BIT
    expected = policy.neural.expected_tokens(choice.k)
    assert rule.rate == pytest.approx(expected / (costs.verify(choice.k + 1) + choice.k * 4.5))
    assert CostPolicy(costs, 0.6).choose([1, 2, 3], 4, None, True).extend is None
    assert policy.choose([1, 2, 3], choice.k, None, True).extend is None
    lookup = CostPolicy(costs, 0.6, calibration=SURE_BELOW_1_BIT).choose([1, 2, 1, 2, 1], 4, (3, (2, 1, 2)), False)
    assert lookup.source == "prompt_lookup" and lookup.extend is None


def test_drafts_past_k_are_proposed_reported_and_not_counted_as_the_positions_acceptance():
    """AutoProposer drafts up to the request's k under the choice's extension; the round's draft steps are those
    the draft ran (its cap now the request's k), the summary says how many drafts went past k, and the policy's
    counts learn positions below k only (a draft kept because its row was sure is no sample of what position j
    yields). Fails if the cap stays the choice's k, or if the extra positions enter the counts."""
    policy = CostPolicy(FLAT, 0.5, calibration=SURE_BELOW_1_BIT)
    always = ConfidentExtension(1, SURE_BELOW_1_BIT, rate=0.0, extra_ms=(1.0,) * 3)
    recording = RecordingPolicy(Choice("neural", 1, extend=always))
    auto = AutoProposer(recording, NeuralProposer(ScriptedRuntime([0.2] * 12), 0.0))
    start = RequestState.start((1, 2, 3))
    for round_index, context in enumerate(([1, 2, 3], [1, 2, 3, 10, 11, 12, 13, 5])):
        proposal = finish(auto.propose(context, 4, round_index, None))
        assert len(proposal.tokens) == 4  # k = 1 and 3 drafts past it
        auto.observe(RoundCommit(round_index, 4, 4, 4, (*proposal.tokens, 5), start, draft_ms=8.0, verify_ms=50.0))
    assert recording.timings[-1].draft_steps == 4  # it reached the request's k: no declined step
    assert auto.summary() == "neural k=1 on 2 rounds, +6 drafts where the draft was sure"
    policy.observe(Choice("neural", 1, extend=always), 4, 4)
    policy.observe(Choice("neural", 2), 1, 1)  # stopped short of k: its declined position counts as rejected
    assert policy.neural.reached == [2, 1] and policy.neural.accepted == [2, 0]
