"""auto: before each round, choose the draft source (none, prompt lookup, neural) and its length k.

The production policy (CostPolicy, version AUTO_POLICY_VERSION; docs/ENGINE.md) maximises expected
emitted tokens per millisecond:

    rate(none)          = 1 / V_c(1)
    rate(lookup, k)     = E_lookup[n](k) / R(k + 1, E)       n: length of the current n-gram match,
                                                             k <= the tokens that followed it
    rate(neural, k)     = E_neural(k) / (s * catch_up(p) + k * D_c + R(k + 1, E))
    D_c = D + max(0, c - 64) * draft_key                 a draft step after c tokens (CostModel.draft)
    catch_up(p) = (p - 1) * draft_feed                   p: tokens the draft would be fed (NeuralProposer.pending);
                                                         s: the round's share of it (catch_up_share; version 18)
    R(T, E) = V_c(T) + (E - 1) * r                           a round reads the E rows it emits
    V_c(T)  = V(T) + max(0, c - 64) * key(T)                 c: context tokens (each row attends to all;
                                                             key(T): a T-row call's price per token)
    E(k) = sum_{i=0..k} S_i,  S_0 = 1,  S_i = prod_{j=1..i} a_j
    a_j  = (accepted_j + W * prior_j) / (reached_j + W)      Beta-smoothed acceptance of draft position j,
                                                             counted over this request's rounds of that
                                                             source (lookup: per n)
    lookup's prior_j(n): LOOKUP_PRIOR's, its odds times L    L: LookupLift.odds, how much likelier this
                                                             conversation's copies (all n) passed than
                                                             their priors said (version 11)
    lookup's counts include the rounds it would have played   CopyLedger (version 21): a copied token passes
    where it did not draft                                   exactly when it is the champion's own sample

V(T) (verify time of T rows, with a rejection and, when sampling, its correction sample), r (processing one more row),
key(T) (a T-row call's cost per context token beyond the 64 V was timed after, measured per T since version 16 at
the request's key length, costs.key_length, near its prompt's own length; used by requests with a prompt of
costs.LONG_CONTEXT tokens or more, else 0) and D (one draft step) come from the
engine's CostModel for the request's kind of sampling, refined from every round's timing (costs.LiveCosts: greedy
requests since version 10, sampled ones since version 19); priors: prompt lookup by n and draft position
(LOOKUP_PRIOR, measured by scripts/auto_priors.py), the neural draft from its package's measured agreement: at its
first position the teacher-forced agreement, at later ones (since version 9) the larger of its agreement right after
an agreeing position and a_0's current estimate (0.345 and 0.38 for the shipped draft; the draft agrees in streaks;
with one prior for every position auto drafted one neural token a round where hybrid's four paid). The highest rate
wins; ties go to none, then lookup, then neural, then the shorter k. When none or the neural draft wins and the
current match's length has not been drafted after in this request (or conversation), a one-token lookup round probes
it if predicted to be at most PROBE_TOLERANCE slower than the winner (against the draft since version 8: its prior
0.345 beat every 1-token match's 0.15, so on summaries auto drafted neurally where such matches were right); else,
when none wins, while the neural draft has had fewer than NEURAL_TRIES rounds, a one-token neural round probes it
where its prior alone says such a round is at most PROBE_TOLERANCE slower than none (with W = 2 one rejection took
a 0.345 prior to 0.23, below the page CPU path's break-even of 0.27, and the draft was never tried again: 0.60x
neural k = 2 on code; since version 17 within the tolerance, not only above break-even). A draft source
that fails is not chosen again in the request (the failed round is a plain champion step). The counts a_j are kept
over a conversation's answers of one kind of sampling (Engine passes the last answer's counts on when the next
prompt extends its prompt and samples alike; greedy only before version 19).

Since version 23 a neural round of k may draft on past k (to the request's k) while the draft's rows are sure: draft
j >= k is kept while what it adds, S * p(h_j) tokens (p: the package's measured acceptance at the row's entropy h,
S: p's product over the round's earlier drafts), per ms of its extra row and draft step beats the round's predicted
rate (ConfidentExtension; the counts learn positions below k only).

Since version 24 the live row price r compares rounds of one request only (costs.LiveCosts.row_ms): across
requests a drifting host's minutes and other prompts priced a read row up to 16 ms where it costs ~0, and auto
drafted one or two copied tokens a round on summaries.

Since version 19 every draft auto proposes is a point mass (the neural draft proposes its argmax at every
temperature), which the verifier tests by the coupled rule (acceptance.py): a token is the champion's own sample
whatever was proposed, so auto's choices change the answer's speed only, never its tokens, greedy or sampled. A
sampled request therefore learns like a greedy one: from live timings and from the conversation's counts, and its
seed still reproduces it (before, its choices steered its seeded draws, so it started from the priors and the
fixed measurement; a neural round at T > 0 tested q's sampled token by the textbook rule. What that costs: at the
positions the shipped draft's stop lets through, the argmax passes with p 0.664 where the sampled token passed
0.684 of the time, scripts/auto_priors.py --tokens 32 --per-task 2 --long 6, 351 positions of 26 prompts).

Exactness: a choice depends only on published state (the context, counts of earlier published rounds,
the costs), never on the current round's draws, so each round's proposal law is exactly the
chosen source's and the verifier keeps the champion's output law. Any such policy is exact; the tests
drive AutoProposer with arbitrary context-based policies too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from math import prod
from typing import Generator, Protocol, Sequence

from ..costs import CostModel, LiveCosts, RoundTiming
from ..errors import SpecChatError
from ..sampling import Draws
from ..transaction import RoundCommit
from ..waits import Wait, settle
from .base import EMPTY_PROPOSAL, KeepRule, Proposal, Proposer
from .neural import AcceptanceByEntropy
from .prompt_lookup import PromptLookup, point_masses

AUTO_POLICY_VERSION = 24
# Prior acceptance of draft position 1 (then of each later position, given the ones before it passed), by
# match length n (6 stands for 6 or more): scripts/auto_priors.py on the draft's held-out prompts and long
# found inputs (not the bench workload; 32 prompts, 40 tokens), greedy and sampled pooled, rounded down
# (n = 4 and 5 pooled: 102 points).
LOOKUP_PRIOR = {1: (0.15, 0.4), 2: (0.4, 0.75), 3: (0.7, 0.8), 4: (0.75, 0.85), 5: (0.75, 0.85), 6: (0.95, 0.95)}
NEURAL_PRIOR = 0.4  # when the package does not record the draft's measured agreement
PRIOR_WEIGHT = 2.0  # pseudo-observations per draft position
LIFT_WEIGHT = 2.0  # pseudo-counts on each side of LookupLift's two odds
PROBE_TOLERANCE = 0.1  # an untried match length's one-token probe may be predicted this much slower than the winner
NEURAL_TRIES = 3  # neural rounds (position 0 reached) its prior buys before the estimate alone decides
SHORT_NAMES = {"none": "none", "prompt_lookup": "lookup", "neural": "neural"}


def auto_lookup() -> PromptLookup:
    """auto's matcher: every match length LOOKUP_PRIOR prices (1 to its longest, which stands for any longer)."""
    return PromptLookup(n_max=max(LOOKUP_PRIOR), n_min=1)


@dataclass(frozen=True)
class Choice:
    source: str  # "none" | "prompt_lookup" | "neural"
    k: int
    bucket: int = 0  # prompt lookup: the match length n
    # neural: a rule that may keep drafts past k (up to the request's k; ConfidentExtension), None: k at most
    extend: KeepRule | None = field(default=None, compare=False)

    def cap(self, k_cap: int) -> int:
        """The most drafts this choice may propose under the request's k_cap: its k, or k_cap when it may extend."""
        return self.k if self.extend is None else k_cap

    @property
    def label(self) -> str:
        return "none" if self.source == "none" else f"{SHORT_NAMES[self.source]} k={self.k}"


NONE = Choice("none", 0)


class Policy(Protocol):
    def choose(
        self,
        context: Sequence[int],
        k_cap: int,
        lookup: tuple[int, tuple[int, ...]] | None,
        neural_available: bool,
        neural_pending: int = 1,
    ) -> Choice:
        """The round's source and k (k <= k_cap; lookup k <= its continuation), from published state only
        (neural_pending: the tokens a neural proposal would feed the draft before its first draft, at least 1)."""

    def observe(self, choice: Choice, proposed: int, accepted: int, timing: RoundTiming | None = None) -> None:
        """The round just published (timing: as the orchestrator measured it)."""

    def reset(self) -> None: ...


class PositionStats:
    """Acceptance by draft position with a Beta prior: a_j = (accepted_j + W prior_j) / (reached_j + W);
    prior_j = first for position 0, then later. streaks: a later position's prior is at least position 0's
    current estimate a_0 (the neural draft: it agrees in streaks, so a draft right here so far is likely right
    further on too; without it a neural round of 2 never won from the priors, its second position was never
    counted, and auto drafted one token a round however often the draft was right)."""

    def __init__(self, first: float, later: float | None = None, streaks: bool = False):
        self.first, self.later = first, first if later is None else later
        self.streaks = streaks
        self.reached: list[int] = []
        self.accepted: list[int] = []

    def reached_at(self, position: int) -> int:
        """Rounds that tested this draft position."""
        return self.reached[position] if position < len(self.reached) else 0

    def prior(self, position: int) -> float:
        """prior_j before any lift: first at position 0, later after it (with streaks, at least a_0)."""
        prior = self.first if position == 0 else self.later
        if position and self.streaks:
            prior = max(prior, self.rate(0))
        return prior

    def rate(self, position: int, lift: float = 1.0) -> float:
        """a_j, its prior's odds scaled by `lift` (LookupLift.odds; 1: the prior as it is)."""
        reached = self.reached_at(position)
        accepted = self.accepted[position] if position < len(self.accepted) else 0
        prior = lifted(self.prior(position), lift)
        return (accepted + PRIOR_WEIGHT * prior) / (reached + PRIOR_WEIGHT)

    def expected_tokens(self, k: int, lift: float = 1.0) -> float:
        """E[emitted] of a round with k drafts: sum_{i=0..k} S_i."""
        total, survive = 1.0, 1.0
        for position in range(k):
            survive *= self.rate(position, lift)
            total += survive
        return total

    def copy(self) -> "PositionStats":
        twin = PositionStats(self.first, self.later, self.streaks)
        twin.reached, twin.accepted = list(self.reached), list(self.accepted)
        return twin

    def record(self, proposed: int, accepted: int) -> None:
        """Draft positions 0..min(accepted, proposed - 1) were tested; those below `accepted` passed."""
        for position in tested_positions(proposed, accepted):
            while len(self.reached) <= position:
                self.reached.append(0)
                self.accepted.append(0)
            self.reached[position] += 1
            self.accepted[position] += position < accepted


def tested_positions(proposed: int, accepted: int) -> range:
    """The draft positions a round with `proposed` drafts, `accepted` of them accepted, tested."""
    return range(min(accepted + 1, proposed))


def lifted(prior: float, odds: float) -> float:
    """prior with its odds p / (1 - p) multiplied by `odds`."""
    return prior * odds / (1 - prior + prior * odds)


@dataclass
class LookupLift:
    """Prompt lookup's drafts against LOOKUP_PRIOR, pooled over match lengths and positions: the positions
    tested, those accepted, and the acceptances the priors expected there. odds() is how much likelier this
    conversation's copies pass than the priors say (both sides Beta-smoothed by LIFT_WEIGHT, so 1 before any
    round), and scales every match length's prior: text that copies well (a summary, a rewrite) lifts the
    lengths not yet counted (a 1-token match's 0.15) from a few rounds of others; text that does not lowers
    them. (Policy 10 learned each length alone from its 2-count prior: on the page's summaries auto drafted
    one or two copied tokens a round where hybrid k = 4's drafts passed 58-88% of the time.)"""

    tested: int = 0
    accepted: int = 0
    expected: float = 0.0

    def record(self, stats: PositionStats, proposed: int, accepted: int) -> None:
        for position in tested_positions(proposed, accepted):
            self.tested += 1
            self.accepted += position < accepted
            self.expected += stats.prior(position)

    def odds(self) -> float:
        w = LIFT_WEIGHT
        seen = (self.accepted + w) / (self.tested - self.accepted + w)
        expected = (self.expected + w) / (self.tested - self.expected + w)
        return seen / expected


class CopyLedger:
    """Prompt lookup's rounds as they would have gone at every answer position where it did not draft: rounds
    auto gave to none or the neural draft, and each token a round emitted after its first (version 21).

    A copied token is a point mass, which the verifier accepts exactly when it is the champion's own sample
    (greedy: its argmax; sampled: the coupled rule), and auto's choices never change those samples. So the
    match found at position p, compared with the answer's tokens from p on, is the outcome a lookup round
    there would have had: accepted = its leading tokens equal to the answer's. settle() reports each such
    round once the answer has shown its mismatch or all its tokens. It reads the published context only.
    (Before, auto learned copying only from rounds that bet on it, from priors that expect short matches to
    fail: a 32-token grammar fix, which copies its prompt, ran 0.82x lookup k = 4 in the page, bench-p20.)"""

    def __init__(self, matcher: PromptLookup):
        self.matcher = matcher
        self.next: int | None = None  # the first context length not yet opened
        self.open: list[tuple[int, int, tuple[int, ...]]] = []  # (position p, match length n, continuation)

    def settle(
        self, context: Sequence[int], k_cap: int, current: tuple[int, tuple[int, ...]] | None
    ) -> list[tuple[int, int, int]]:
        """Open a round at every position emitted since the last call (`current`: the match at the context's
        end, as the caller found it), and return (n, proposed, accepted) for each open round now decided."""
        length = len(context)
        if self.next is None:
            self.next = length  # the answer starts here: prompt positions are not scored
        for position in range(self.next, length):
            self.opened(position, self.matcher.match(context[:position], k_cap))
        decided, still_open = [], []
        for position, n, tokens in self.open:
            seen = min(len(tokens), length - position)
            passed = next((j for j in range(seen) if tokens[j] != context[position + j]), seen)
            if passed < seen or seen == len(tokens):
                decided.append((n, len(tokens), passed))
            else:
                still_open.append((position, n, tokens))
        self.open = still_open
        if length >= self.next:  # a context already opened (a caller asking twice) is not opened again
            self.opened(length, current)
            self.next = length + 1
        return decided

    def opened(self, position: int, match: tuple[int, tuple[int, ...]] | None) -> None:
        if match is not None and match[1]:
            self.open.append((position, match[0], tuple(match[1])))

    def drafted(self) -> None:
        """The round at the last opened position drafted a lookup proposal: it is counted as played."""
        if self.open and self.open[-1][0] == self.next - 1:
            self.open.pop()


@dataclass(frozen=True)
class ConfidentExtension:
    """A neural round's keep rule (version 23). Its first k drafts are kept (the entropy stop aside). A further
    draft j is kept while what it adds raises the round's rate: S * p(h_j) tokens for extra_ms[j - k] ms (plus
    reading its row, S * p(h_j) * row_ms) must beat `rate`, the chosen round's predicted tokens per ms. p is the
    draft's calibrated acceptance at the entropy h of its row (AcceptanceByEntropy), S the product of p over the
    round's earlier drafts: the chance they all passed. Where the draft is sure (the shipped draft is right 92-97%
    of the time below 1 bit) a round drafts on past the k its counts chose: in the page, hybrid k = 4 took 4.0 tokens
    a call on a short chat where auto's estimated k took 3.2-3.6 (bench-p22, ambiguous). A function of the rows'
    entropies only, so of the draft prefix: exact (base.KeepRule)."""

    k: int  # drafts kept whatever their entropy says (the choice's k)
    acceptance: AcceptanceByEntropy
    rate: float  # tokens per ms the chosen round is predicted to emit
    extra_ms: tuple[float, ...]  # extra_ms[j - k]: keeping draft j: one verified row more and one more draft step
    row_ms: float = 0.0  # reading a row the round emits

    def __call__(self, entropies: Sequence[float]) -> bool:
        position = len(entropies) - 1
        if position < self.k:
            return True
        if position - self.k >= len(self.extra_ms):
            return False
        gain = prod(self.acceptance(bits) for bits in entropies)  # expected tokens this draft adds
        return gain / (self.extra_ms[position - self.k] + gain * self.row_ms) > self.rate


@dataclass(frozen=True)
class Learned:
    """What a CostPolicy counted over one or more answers of a conversation (Engine keeps it between turns)."""

    lookup: dict[int, PositionStats]  # by match length n
    neural: PositionStats
    rounds: int  # published rounds these counts come from
    lift: LookupLift = field(default_factory=LookupLift)  # lookup's acceptance against its priors, all n

    def copy(self) -> "Learned":
        lookup = {n: stats.copy() for n, stats in self.lookup.items()}
        return Learned(lookup, self.neural.copy(), self.rounds, replace(self.lift))


class CostPolicy:
    def __init__(
        self,
        costs: CostModel,
        neural_prior: float = NEURAL_PRIOR,
        earlier: Learned | None = None,
        probe_tolerance: float = PROBE_TOLERANCE,
        neural_later: float | None = None,
        live: LiveCosts | None = None,
        answer_end: int | None = None,
        calibration: AcceptanceByEntropy | None = None,
    ):
        """neural_prior: the draft's acceptance at its first position; neural_later: at each later position
        given the ones before it passed (None: neural_prior). earlier: counts from this conversation's earlier
        answers to start from (else the priors alone); probe_tolerance 0: never probe (the rate formula alone).
        live: refine `costs` from every round's timing (auto's tokens do not depend on its choices); None: the
        costs stay as given. answer_end:
        the context length where the answer must end (prompt + max tokens), over whose tokens a draft's catch-up
        is spread (None: a round pays all of it). calibration: the draft's acceptance by its row's entropy, with
        which a neural round may draft past its k (ConfidentExtension; None: never)."""
        self.costs = costs
        self.calibration = calibration
        self.answer_end = answer_end
        self.live = live
        self.neural_prior = neural_prior
        self.neural_later = neural_later
        self.probe_tolerance = probe_tolerance
        self.earlier = earlier
        self.reset()

    def reset(self) -> None:
        """Start from the earlier answers' counts (a copy), else from the priors alone."""
        if self.earlier is None:
            priors = {n: PositionStats(*prior) for n, prior in LOOKUP_PRIOR.items()}
            start = Learned(priors, PositionStats(self.neural_prior, self.neural_later, streaks=True), 0)
        else:
            start = self.earlier.copy()
        self.lookup, self.neural, self.rounds, self.lift = start.lookup, start.neural, start.rounds, start.lift
        self.copies = CopyLedger(auto_lookup())  # this request's answer only

    def learned(self) -> Learned:
        """The counts so far (earlier answers' included), for the conversation's next answer."""
        return Learned(self.lookup, self.neural, self.rounds, self.lift).copy()

    def choose(self, context, k_cap, lookup, neural_available, neural_pending: int = 1) -> Choice:
        for n, proposed, accepted in self.copies.settle(context, k_cap, lookup):
            self.learn_lookup(n, proposed, accepted)
        length = len(context)  # a longer context makes every verify call cost more (CostModel.key_ms)
        best, best_rate = NONE, 1.0 / self.costs.verify(1, length)
        if lookup is not None:
            n, tokens = lookup
            stats, lift = self.lookup_stats(n), self.lift.odds()
            for k in range(1, min(k_cap, len(tokens)) + 1):
                expected = stats.expected_tokens(k, lift)
                rate = self.lookup_rate(k, expected, length)
                if rate > best_rate:
                    best, best_rate = Choice("prompt_lookup", k, n), rate
        if neural_available and self.costs.draft_step_ms is not None:
            for k in range(1, k_cap + 1):
                expected = self.neural.expected_tokens(k)
                rate = self.neural_rate(k, expected, length, neural_pending)
                if rate > best_rate:
                    best, best_rate = Choice("neural", k), rate
        if best.source != "prompt_lookup" and lookup is not None and lookup[1]:
            probe = self.probe(lookup[0], best_rate, length)
            best = best if probe == NONE else probe
        if best == NONE and neural_available and self.costs.draft_step_ms is not None:
            best = self.neural_probe(best_rate, length, neural_pending)
        if best.source == "neural" and self.calibration is not None and k_cap > best.k:
            best = replace(best, extend=self.extension(best.k, k_cap, best_rate, length))
        return best

    def extension(self, k: int, k_cap: int, rate: float, length: int) -> ConfidentExtension:
        """The keep rule of a neural round of k drafts predicted at `rate` tokens per ms, up to k_cap drafts: keeping
        draft j makes its verify call one row longer and runs one more draft step (to see the next row)."""
        costs = self.costs
        extra = tuple(
            costs.verify(j + 2, length) - costs.verify(j + 1, length) + costs.draft(1, length) for j in range(k, k_cap)
        )
        return ConfidentExtension(k, self.calibration, rate, extra, costs.row_ms)

    def learn_lookup(self, n: int, proposed: int, accepted: int) -> None:
        """A lookup round after an n-token match, drafted or scored by the CopyLedger."""
        stats = self.lookup_stats(n)
        self.lift.record(stats, proposed, accepted)
        stats.record(proposed, accepted)

    def lookup_stats(self, n: int) -> PositionStats:
        """The counts for matches of length n (LOOKUP_PRIOR's longest length stands for any longer one)."""
        return self.lookup[min(n, max(LOOKUP_PRIOR))]

    def probe(self, n: int, best_rate: float, length: int) -> Choice:
        """A match length whose rate is unknown here (no round has drafted after such a match yet) gets one
        one-token round if that is predicted to cost less than probe_tolerance of the best choice's rate
        (none's, or the neural draft's): its outcome then moves the estimate (a success from 0.15 to 0.43
        for n = 1) for the rounds after it. NONE: no probe (as neural_probe)."""
        stats = self.lookup_stats(n)
        if stats.reached:
            return NONE
        expected = stats.expected_tokens(1, self.lift.odds())
        rate = self.lookup_rate(1, expected, length)
        return Choice("prompt_lookup", 1, n) if rate > (1 - self.probe_tolerance) * best_rate else NONE

    def neural_probe(self, none_rate: float, length: int, pending: int = 1) -> Choice:
        """While the neural draft has had fewer than NEURAL_TRIES rounds, a one-token neural round where its
        prior alone says such a round is at most probe_tolerance slower than none: a first rejection (or entropy
        stop) does not rule out a draft its prior recommends, and a prior just short of break-even does not rule
        out a draft that is right more often on this text (since version 17: a sampled page bench's code, json
        and ambiguous prompts, priced by a 0.345 prior 2% short of paying, never drafted neurally, where the
        draft's first tokens passed 52-66% and hybrid k = 4 ran 1.2-1.5x); never where its round could not pay
        were its token always right. (probe_tolerance 0: no probe.)"""
        if self.probe_tolerance <= 0 or self.neural.reached_at(0) >= NEURAL_TRIES:
            return NONE
        expected = 1.0 + self.neural_prior
        share = max(1 / NEURAL_TRIES, self.catch_up_share(expected, length))  # the tries share a catch-up
        near = self.neural_rate(1, expected, length, pending, share) > (1 - self.probe_tolerance) * none_rate
        can_pay = self.neural_rate(1, 2.0, length, pending, share) > none_rate  # were its token always right
        return Choice("neural", 1) if near and can_pay else NONE

    def lookup_rate(self, k: int, expected: float, length: int) -> float:
        """Emitted tokens per ms of a lookup round of k drafts expected to emit `expected` tokens."""
        return expected / self.costs.round_ms(k + 1, expected, length)

    def neural_rate(self, k: int, expected: float, length: int, pending: int = 1, share: float | None = None) -> float:
        """Emitted tokens per ms of a neural round: the draft's catch-up on `pending` tokens (its `share`; None:
        catch_up_share's for the `expected` tokens), k draft steps, then the verify call."""
        share = self.catch_up_share(expected, length) if share is None else share
        catch_up = self.costs.catch_up(pending) * share
        return expected / (catch_up + self.costs.draft(k, length) + self.costs.round_ms(k + 1, expected, length))

    def catch_up_share(self, expected: float, length: int) -> float:
        """The part of a catch-up a neural round chosen on its rate pays: the catch-up serves every neural round
        after it, so it is spread over the tokens the answer may still emit (1 without answer_end). A probe's
        tries share it among themselves instead (neural_probe): they may be the draft's only rounds."""
        if self.answer_end is None:
            return 1.0
        return min(1.0, expected / max(1, self.answer_end - length))

    def observe(self, choice: Choice, proposed: int, accepted: int, timing: RoundTiming | None = None) -> None:
        if self.live is not None and timing is not None:
            self.live.record(timing, self.costs.key_ms)
            self.costs = self.live.model(**self.costs.context_terms())
        self.rounds += 1
        if choice.source == "prompt_lookup":
            self.copies.drafted()
            self.learn_lookup(choice.bucket, proposed, accepted)
        elif choice.source == "neural":
            # A draft that stopped short of k (its entropy stop) declined the next position: for what a
            # neural round of k yields, that counts as a rejection there. Drafts past k (its extension) are
            # not counted: they were kept because their rows were sure, no sample of what position j yields.
            if proposed < choice.k:
                self.neural.record(proposed + 1, accepted)
            else:
                self.neural.record(choice.k, min(accepted, choice.k))


class AutoProposer:
    """A Proposer that runs, each round, the source and k its policy chooses (propose is Steps)."""

    name = "auto"

    def __init__(self, policy: Policy, neural: Proposer | None, lookup: PromptLookup | None = None):
        self.policy = policy
        self.neural = neural
        self.lookup = lookup or auto_lookup()
        self.reset()

    def reset(self) -> None:
        self.policy.reset()
        if self.neural is not None:
            self.neural.reset()
        self.last = self.previous = NONE  # the last round's choice; the one published before it
        self.last_context = 0  # tokens before the last round
        self.observed = 0  # rounds of this request published so far
        self.neural_failed = False
        self.rounds: Counter[str] = Counter()  # choice label -> rounds
        self.cap = 0  # the last round's draft cap: its k, or the request's k where its choice may extend
        self.extended = 0  # drafts neural rounds kept past their k (ConfidentExtension)

    def propose(
        self, context: Sequence[int], k: int, round_index: int, draws: Draws | None
    ) -> Generator[Wait, None, Proposal]:
        match = self.lookup.match(context, k) if k > 0 else None
        available = self.neural is not None and not self.neural_failed
        pending = self.neural.pending(context) if available else 1
        choice = self.policy.choose(context, k, match, available, neural_pending=pending) if k > 0 else NONE
        self.last, self.last_context = choice, len(context)
        self.rounds[choice.label] += 1
        if choice.source == "prompt_lookup":  # the match found above, cut to the chosen k
            return point_masses(match[1][: choice.k])
        if choice.source == "neural":
            self.cap = choice.cap(k)
            keep = {} if choice.extend is None else {"keep": choice.extend}
            try:
                return (yield from settle(self.neural.propose(context, self.cap, round_index, draws, **keep)))
            except SpecChatError:
                self.neural_failed = True  # not chosen again in this request; this round is a plain step
                return EMPTY_PROPOSAL
        return EMPTY_PROPOSAL

    def observe(self, commit: RoundCommit) -> None:
        """The round just published: its drafts, how many were accepted, its timings."""
        choice, proposed, accepted = self.last, commit.proposed, commit.accepted
        steps = 0
        # A per-step draft time only where the round before was neural too: a first neural round also feeds
        # the draft every token since its last one (the whole prompt, in a request's first: 380 ms a "step"
        # at 1,700 tokens in a page bench). A draft that stopped short of its cap ran the step it declined.
        if choice.source == "neural" and self.previous.source == "neural" and not self.neural_failed:
            steps = proposed if proposed == self.cap else proposed + 1
        if choice.source == "neural":
            self.extended += max(0, proposed - choice.k)
        self.previous = choice
        first = self.observed == 0  # its verify call may have waited on the prompt's prefill too
        self.observed += 1
        timing = RoundTiming(
            proposed + 1, accepted + 1, self.last_context, commit.verify_ms, steps, commit.draft_ms, first
        )
        self.policy.observe(choice, proposed, accepted, timing)

    def summary(self) -> str:
        """e.g. "lookup k=3 on 12 rounds, none on 4" (most used first), and the drafts neural rounds kept past their
        k ("neural k=2 on 8 rounds, +5 drafts where the draft was sure")."""
        parts = [f"{label} on {count} round{'s' if count != 1 else ''}" for label, count in self.rounds.most_common()]
        if self.extended:
            parts.append(f"+{self.extended} draft{'s' if self.extended != 1 else ''} where the draft was sure")
        return ", ".join(parts)
