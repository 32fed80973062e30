"""What a round costs on this device: the champion's verify time by row count and the neural draft's time per
token, measured once per engine and kind of sampling (the `auto` scheduler's inputs, see proposers/auto.py).

Measured with verify calls at the request's sampling settings whose point-mass drafts are rejected at once (so
V(T) holds one processed row, and when sampling the correction drawn at the rejection), after a
64-token context, at T in MEASURED_ROWS over three sweeps after a warm-up: V(1) the best 1-row call, V(T) that
plus the median of its call's excess over the 1-row call of the same sweep; other T are interpolated linearly. A
sweep whose V(T) do not rise with T (a busy neighbour slowed the small calls of those seconds: a 2026-12-02
page load measured sampled V(1) = V(2) = 86.6 ms where its champion-alone rounds took 70 ms,
and auto then drafted a "free" second row at a loss) is swept again, up to EXTRA_SWEEPS times, and the result
is made non-decreasing (a call of fewer rows costs at most one of more). The
draft's cost is a one-token proposal through the neural proposer itself, and what feeding it a token costs
beyond that (draft_feed_ms: a fresh cache's first proposal feeds the whole context; a request's first neural
round feeds its prompt so). Every further row a round reads costs
the processing of a row on top, row_ms: greedily, a 2-row call whose draft is the champion's own token (accepted,
so its row is read too) less one whose draft is rejected (~0 on WebGPU, where acceptance runs on the GPU; the
CPU path's pass over a 49,152-entry row in Python, which version 9 priced at 0); when sampling, plus
V_sampled(1) - V_greedy(1) (softmax, top-p). Each pair is timed side by side in every sweep (machine drift
between separate passes would land in the difference).

A verify call also reads every context token (each row attends to all of them, and the runtime passes the KV
cache), so at a long context it costs more than V(T) says: key_ms[T - 1], the ms a call of T rows adds per context
token beyond the 64 of the measurement, comes from greedy verify calls at each measured T after L tokens against
the same after 64. L is a request's key length (key_length): the largest of LONG_CONTEXT * KEY_STEP^j (512, 724,
1,024, 1,448, 2,048, ...) that its prompt reaches, measured once per engine at the first auto request of that
length (short chats never pay for it). Per T, not per row: on the page's CPU path at ~1,700 tokens a 1-row call
took 65 ms more than at 64 tokens, a 2-row call 110 more and a 5-row call 130 (policy 14's one slope per row,
fitted from T = 1 and 9 at 512 tokens, priced 18, 36 and 89, so a drafted row looked dearer beside none than it
was). Near the request's own length, not at 512 for every length: what a context token costs is not the same at
every length there (policy 15 measured 0.068 ms per token for a 1-row call at 512 tokens, which priced a 1-row
call at 1,700 tokens 111 ms dearer where it took 65, and auto drafted one-token rounds that lost). The draft
is timed there too (measure_draft_context): its step's cost per context token beyond 64 (draft_key_ms), and its
feed per token on a catch-up of that length. The
measurement runs as Steps (waits.py), so the browser's asynchronous CPU champion and draft runtime can be timed
too. KV caches are forgotten after.

LiveCosts refines a measurement from published rounds' timings, row_ms included (every auto request: its tokens do
not depend on the choices, so choices may follow the clock).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from itertools import combinations
from statistics import median
from typing import Callable, Generator, Sequence

from .acceptance import PointMass
from .champion import VerifyRequest
from .processors import SamplingSettings
from .sampling import SeededDraws
from .waits import Wait, settle

MEASURED_ROWS = (1, 2, 3, 5, 9)
GREEDY = SamplingSettings(temperature=0)
CONTEXT = tuple(100 + i for i in range(64))
EXTRA_SWEEPS = 4  # further sweeps while the measured V(T) do not rise with T
RISE_MS = 1e-3  # a V(T) this much above V(T - 1) rises (a median of an even count can tie to rounding error)
LONG_CONTEXT = 512  # tokens: a prompt this long has its context priced (key_ms), measured at its key_length
KEY_STEP = 2**0.5  # the lengths key_ms is measured at: LONG_CONTEXT * KEY_STEP**j, rounded
LIVE_WINDOW = 16  # rounds: LiveCosts keeps this many recent timings per row count (and for the draft)
LIVE_MIN_ROUNDS = 3  # rounds of one row count before their median replaces that row count's measurement
LIVE_MAX_AGE = 64  # rounds (of every row count): an older timing no longer describes the machine and is dropped
ROW_MIN_PAIRS = 8  # pairs of rounds (one request and T, other rows read) before row_ms is learned live
MIN_PACE = 0.25  # a live V(T) sample (rows read taken off) is at least this share of the measured V(T)


@dataclass(frozen=True)
class CostModel:
    verify_ms: tuple[float, ...]  # verify_ms[T - 1]: one verify call of T rows, T = 1..T_max
    draft_step_ms: float | None  # one neural draft step (one token, the proposer's work included); None: no draft
    row_ms: float = 0.0  # processing one more verified row (greedy: its argmax; sampled: softmax, top-p, ...)
    key_ms: tuple[float, ...] = ()  # key_ms[T - 1]: a T-row call's ms per context token beyond len(CONTEXT); (): 0
    key_length: int = 0  # the context length key_ms (and draft_key_ms) was measured at (key_length; 0: none)
    draft_key_ms: float = 0.0  # a draft step's ms per context token beyond len(CONTEXT), measured at key_length
    draft_feed_ms: float = 0.0  # ms per token the draft is fed to catch up (a fresh cache: the whole prompt)

    def verify(self, rows: int, context: int = len(CONTEXT)) -> float:
        """A verify call of `rows` rows after `context` tokens."""
        return self.verify_ms[min(rows, len(self.verify_ms)) - 1] + context_ms(self.key_ms, rows, context)

    def draft(self, steps: int, context: int = len(CONTEXT)) -> float:
        """`steps` neural draft steps after `context` tokens (each feeds one token; a catch-up is catch_up's)."""
        return steps * (self.draft_step_ms + max(0, context - len(CONTEXT)) * self.draft_key_ms)

    def catch_up(self, pending: int) -> float:
        """Feeding the draft the `pending` tokens it has not seen before its first step of a proposal, beyond the
        one every step feeds (a round after a neural round: the emitted tokens; a request's first: its prompt)."""
        return max(0, pending - 1) * self.draft_feed_ms

    def round_ms(self, rows: int, expected_tokens: float, context: int = len(CONTEXT)) -> float:
        """A verify round of `rows` rows after `context` tokens that emits `expected_tokens` on average: it
        reads that many rows, one of which V(rows) already holds."""
        return self.verify(rows, context) + (expected_tokens - 1.0) * self.row_ms

    def summary(self) -> dict:
        return {
            "verify_ms": [round(v, 3) for v in self.verify_ms],
            "draft_step_ms": None if self.draft_step_ms is None else round(self.draft_step_ms, 3),
            "row_ms": round(self.row_ms, 3),
            "key_ms": [round(k, 6) for k in self.key_ms],
            "key_length": self.key_length,
            "draft_key_ms": round(self.draft_key_ms, 6),
            "draft_feed_ms": round(self.draft_feed_ms, 6),
        }

    def context_terms(self) -> dict:
        """What the request's context length priced (CostModel fields): for LiveCosts.model to keep."""
        return {
            "key_ms": self.key_ms,
            "key_length": self.key_length,
            "draft_key_ms": self.draft_key_ms,
            "draft_feed_ms": self.draft_feed_ms,
        }


def context_ms(key_ms: Sequence[float], rows: int, context: int) -> float:
    """What `context` tokens add to a verify call of `rows` rows beyond the len(CONTEXT) its V(T) was timed after
    (key_ms: CostModel.key_ms; empty: not measured, 0)."""
    if not key_ms:
        return 0.0
    return max(0, context - len(CONTEXT)) * key_ms[min(rows, len(key_ms)) - 1]


@dataclass(frozen=True)
class RoundTiming:
    """One published round as timed by the orchestrator (what LiveCosts learns from)."""

    rows: int  # verified rows T (the round's drafts + 1)
    read: int  # rows the round's decision read (accepted drafts + 1)
    context: int  # tokens before the round
    verify_ms: float  # the champion's verify call
    draft_steps: int  # neural draft steps the proposal ran (0: prompt lookup, none, or not a per-step time)
    draft_ms: float  # the proposal
    first: bool = False  # the request's first round: its verify call may also wait on the prompt's prefill


class LiveCosts:
    """A measured CostModel refined from published rounds' timings (auto requests, see engine.py).

    Each round's verify time, less the row processing and context terms the model adds back
    (row_ms, and key_ms's context_ms), is a sample of V(T) at its row count T. A row count with LIVE_MIN_ROUNDS samples
    takes the median of its last LIVE_WINDOW. One with fewer takes its measurement, scaled down when
    recent rounds ran faster than measured (pace: the median ratio of recent samples to the measurement;
    a busy neighbour can inflate a measurement's minute: a 2026-12-02 page load measured sampled V(1)
    96 ms where that bench's rounds took 69) but never up: a slower pace may be the observed row
    counts' own shape (rows dearer than measured), and pricing the untried choice at most at its
    measurement gets it tried, and so timed; but never below a smaller row count's live time (more rows
    never cost less: without that floor, V(2) seen at 80 ms beside a measured V(3) of 54 had auto try
    three rows next). The draft step D: the median of recent neural rounds' ms per draft step, once there
    are LIVE_MIN_ROUNDS. A timing older than LIVE_MAX_AGE rounds is dropped (policy 13): a row count that
    is no longer chosen is otherwise never timed again, so a slow minute's samples priced it for good (a
    2026-12-04 page bench: 2-row rounds timed at 87 ms in a busy minute held V(2) at 82 ms for the rest of
    the run, where V(1) came back to 45, and auto never drafted on the short chats where neural k = 2 ran 1.22x);
    dropped, the row count falls back to its measurement at the recent pace, and gets tried again.

    row_ms itself is learned too (policy 20): rounds of one T that read different numbers of rows differ by those
    rows' processing. The load measures it from one difference of two timings per sweep, and a 2026-12-07 WebGPU
    load measured 21.4 ms where a read row costs ~0 there: every accepted draft was priced 21 ms dearer, and
    subtracted from accepted rounds it put the live V(2) at 41.6 ms below V(1)'s 53.4. Since policy 24 only rounds
    of one request are compared (row_ms): policy 20 compared the medians of all recent rounds by rows read, and
    those came from different requests, so from other minutes of a drifting host and other prompts (a page bench,
    bench-copy 2026-12-08: none's own speed on one prompt ranged 20-28 tok/s between its repeats; summaries, whose
    rounds read many rows, learned row_ms up to 16 ms (over 3 ms after 5 of 9 answers) where the rounds within one
    answer show 0 +- 0.5 ms, and auto drafted one or two copied tokens a round at 0.86x the best fixed lookup arm)."""

    def __init__(self, measured: CostModel):
        self.measured = measured
        self.clock = 0  # rounds recorded (long-context ones included): the age of a sample
        self.request = 0  # requests begun (a request's first round starts one): rows read are compared within one
        # (clock, (request, T, rows read, verify ms less context_ms)): every timing young enough to be used (at most
        # one a round, so LIVE_MAX_AGE of them); V(T) samples once row_ms is taken off (windows())
        self.timings: deque[tuple[int, tuple[int, int, int, float]]] = deque(maxlen=LIVE_MAX_AGE)
        self.draft: deque[tuple[int, float]] = deque(maxlen=LIVE_WINDOW)  # recent (clock, ms per draft step)

    def record(self, timing: RoundTiming, key_ms: Sequence[float] = ()) -> None:
        """Learn from one round; key_ms: the context price the request's model used (empty: none). A round after
        LONG_CONTEXT tokens or more is left out: what its context adds is key_ms's to price, and less that
        estimate it was no sample of the short-context V(T) (a 2026-12-02 page bench's long-context stratum
        left V(3) at 100 ms against a measured 53, and auto then stopped drafting on the short chats after).
        A request's first round is left out too (policy 22): the WebGPU champion submits the prompt's prefill
        without waiting for it, so that round's verify call also waits for the prefill (natively on lavapipe
        4.0 s for a 57-token prompt against V(2) 182 ms: two such rounds set the live V(2) at 3,962 ms, and
        auto played none on every round of the requests after)."""
        self.clock += 1
        self.request += timing.first
        if timing.first or timing.context >= LONG_CONTEXT:
            return
        m = self.measured
        rows = min(timing.rows, len(m.verify_ms))
        ms = max(0.0, timing.verify_ms - context_ms(key_ms, timing.rows, timing.context))
        self.timings.append((self.clock, (self.request, rows, timing.read, ms)))
        if timing.draft_steps and m.draft_step_ms is not None:
            self.draft.append((self.clock, timing.draft_ms / timing.draft_steps))

    def recent(self, samples) -> list:
        """The values of (clock, value) samples at most LIVE_MAX_AGE rounds old."""
        return [value for clock, value in samples if self.clock - clock < LIVE_MAX_AGE]

    def windows(self) -> tuple[list[tuple[int, int, float]], dict[int, list[tuple[int, float]]]]:
        """The recent timings the V(T) estimates use: the last LIVE_WINDOW of all, as (T, rows read, ms) (the pace),
        and T -> the last LIVE_WINDOW of that T, as (rows read, ms)."""
        timings = self.recent(self.timings)
        by_rows: dict[int, list[tuple[int, float]]] = {}
        for _, rows, read, ms in timings:
            by_rows.setdefault(rows, []).append((read, ms))
        pace = [(rows, read, ms) for _, rows, read, ms in timings[-LIVE_WINDOW:]]
        return pace, {rows: samples[-LIVE_WINDOW:] for rows, samples in by_rows.items()}

    def row_ms(self) -> float:
        """What reading one more row costs, from live rounds: the median, over every pair of recent rounds of one
        request and one T that read different numbers of rows, of their verify times' difference per row read
        (at least 0; a pair's two rounds ran the same prompt in the same minute, and the median of pairs shrugs off
        a round that waited on a garbage collection). The measurement until there are ROW_MIN_PAIRS such pairs."""
        groups: dict[tuple[int, int], list[tuple[int, float]]] = {}  # (request, T) -> (rows read, ms)
        for request, rows, read, ms in self.recent(self.timings):
            groups.setdefault((request, rows), []).append((read, ms))
        rises = [
            (b_ms - a_ms) / (b - a)
            for samples in groups.values()
            for (a, a_ms), (b, b_ms) in combinations(samples, 2)
            if a != b
        ]
        return max(0.0, median(rises)) if len(rises) >= ROW_MIN_PAIRS else self.measured.row_ms

    def model(self, key_ms: Sequence[float] = (), key_length: int = 0, **draft_context: float) -> CostModel:
        """The refined CostModel (the measurement itself before any round), pricing context by key_ms (measured
        at key_length tokens); draft_context: draft_key_ms, draft_feed_ms (else the measurement's)."""
        m = self.measured
        row_ms = self.row_ms()
        recent, by_rows = self.windows()
        paces = [self.sample(rows, read, ms, row_ms) / m.verify_ms[rows - 1] for rows, read, ms in recent]
        pace = min(1.0, median(paces)) if paces else 1.0
        verify, floor = [], 0.0  # floor: the dearest fewer rows seen live (more rows never cost less)
        for rows, measured in enumerate(m.verify_ms, start=1):
            samples = [self.sample(rows, read, ms, row_ms) for read, ms in by_rows.get(rows, ())]
            if len(samples) >= LIVE_MIN_ROUNDS:
                verify.append(median(samples))
                floor = max(floor, verify[-1])
            else:
                verify.append(max(measured * pace, floor))
        steps = self.recent(self.draft)
        draft = median(steps) if len(steps) >= LIVE_MIN_ROUNDS else m.draft_step_ms
        context = {"key_ms": tuple(key_ms), "key_length": key_length, **draft_context}
        return replace(m, verify_ms=tuple(verify), draft_step_ms=draft, row_ms=row_ms, **context)

    def sample(self, rows: int, read: int, ms: float, row_ms: float) -> float:
        """A T-row round's V(T) sample: its verify ms less the rows it read beyond one, at least MIN_PACE of the
        measured V(T). A row price learned too high can take a read-heavy round below 0: a busy host's load measured
        row_ms 17.4 ms (native CPU, ~0-1 ms quiet), a 9-row round that read 9 rows in 60 ms then set the pace
        negative and V(1) to 0, and none's rate 1 / V(1) divided by zero, ending the answer with an INTERNAL error."""
        return max(ms - (read - 1) * row_ms, MIN_PACE * self.measured.verify_ms[rows - 1])

    def rounds(self) -> int:
        """Rounds learned from (all row counts, within the windows and LIVE_MAX_AGE)."""
        return sum(len(samples) for samples in self.windows()[1].values())


def cost_kind(settings: SamplingSettings) -> str:
    """Requests whose rounds cost alike share one measurement: greedy, or sampled with the filters in use."""
    if settings.greedy:
        return "greedy"
    filters = [name for name, on in (("top_k", settings.top_k), ("top_p", settings.top_p < 1)) if on]
    return "+".join(["sampled", *filters])


def interpolate(points: dict[int, float], t_max: int) -> tuple[float, ...]:
    """Piecewise-linear values for T = 1..t_max through the measured (T, ms) points (flat beyond them)."""
    known = sorted(points.items())
    out = []
    for rows in range(1, t_max + 1):
        below = max((p for p in known if p[0] <= rows), default=known[0])
        above = min((p for p in known if p[0] >= rows), default=known[-1])
        if above[0] == below[0]:
            out.append(below[1])
        else:
            share = (rows - below[0]) / (above[0] - below[0])
            out.append(below[1] + share * (above[1] - below[1]))
    return tuple(out)


@dataclass(frozen=True)
class Case:
    """One timed verify call: `rows` rows at `settings`; own: its first draft is the champion's own greedy
    token (so a greedy call accepts it and reads its row too); the other drafts are rejected at once."""

    rows: int
    settings: SamplingSettings
    own: bool = False


def measure_costs(
    champion, draft, t_max: int, settings: SamplingSettings = GREEDY, repeats: int = 3
) -> Generator[Wait, None, CostModel]:
    """Verify time for T = 1..t_max (rows per call; k_max + 1) at `settings`, the time of one more processed
    row, and the time of a one-token proposal of `draft` (the neural proposer at the request's settings,
    or None)."""
    rows = sorted({min(r, t_max) for r in MEASURED_ROWS})
    # Row costs are differences of two timings: each pair is taken side by side, every sweep.
    cases = [Case(r, settings) for r in rows]
    if t_max >= 2:  # one greedy row's processing: a 2-row call whose draft passes, against one rejected at once
        cases += [case for case in (Case(2, GREEDY), Case(2, GREEDY, own=True)) if case not in cases]
    if not settings.greedy:
        cases.insert(1, Case(1, GREEDY))

    def curve(sweeps: dict[Case, list[float]]) -> dict[int, float]:
        """{T: V(T)}: the best 1-row call plus each T's median excess over the 1-row call of its sweep."""
        one_row = sweeps[Case(1, settings)]
        return {r: min(one_row) + paired_excess(sweeps[Case(r, settings)], one_row) for r in rows}

    def rising(sweeps: dict[Case, list[float]]) -> bool:
        v = curve(sweeps)
        return all(v[b] - v[a] > RISE_MS for a, b in zip(rows, rows[1:]))

    sweeps = yield from verify_ms(champion, cases, repeats, settled=rising)
    v = curve(sweeps)
    best = {r: min(v[t] for t in rows if t >= r) for r in rows}  # non-decreasing in T
    row_ms = 0.0
    if t_max >= 2:  # one greedy row's processing
        row_ms = max(0.0, paired_excess(sweeps[Case(2, GREEDY, own=True)], sweeps[Case(2, GREEDY)]))
    if not settings.greedy:  # a sampled row's processing beyond the greedy one's, plus the greedy one's
        row_ms += max(0.0, paired_excess(sweeps[Case(1, settings)], sweeps[Case(1, GREEDY)]))
    draft_ms, feed_ms = None, 0.0
    if draft is not None:
        draft_ms, feed_ms = yield from time_draft(draft, repeats, settings)
    return CostModel(interpolate(best, t_max), draft_ms, row_ms, draft_feed_ms=feed_ms)


def paired_excess(times: Sequence[float], baseline: Sequence[float]) -> float:
    """Median over sweeps of times[i] - baseline[i] (each pair timed side by side in sweep i, so a slow
    minute that hits both cancels; a 2026-12-04 native sampled sweep, rows ~1.5 ms apart, took bests that
    each had their own minute's noise and came out flat, V(1) = V(2) = V(3))."""
    return median(t - b for t, b in zip(times, baseline))


def key_length(prompt_tokens: int, context_limit: int, t_max: int) -> int | None:
    """The context length whose measured key_ms prices a request of `prompt_tokens`: the largest LONG_CONTEXT *
    KEY_STEP**j it reaches that the champion's context holds with t_max rows after; None below LONG_CONTEXT (a
    short request prices no context) or where not even LONG_CONTEXT fits."""
    best = None
    length, j = LONG_CONTEXT, 0
    while length <= prompt_tokens and length + t_max <= context_limit:
        best = length
        j += 1
        length = round(LONG_CONTEXT * KEY_STEP**j)
    return best


def measure_key_ms(champion, t_max: int, length: int, repeats: int = 3) -> Generator[Wait, None, tuple[float, ...]]:
    """key_ms for T = 1..t_max (CostModel.key_ms) as seen at `length` context tokens (a key_length): greedy verify
    calls at each measured T after `length` tokens against the same after CONTEXT, their difference per context
    token, made non-decreasing in T (a call of more rows reads the context at least as often) and interpolated
    between the measured T."""
    rows = sorted({min(r, t_max) for r in MEASURED_ROWS})
    short = yield from verify_ms_by_rows(champion, rows, repeats)
    long = yield from verify_ms_by_rows(champion, rows, repeats, GREEDY, tuple(100 + i for i in range(length)))
    tokens = length - len(CONTEXT)
    per_token, floor = {}, 0.0
    for r in rows:
        floor = max(floor, (long[r] - short[r]) / tokens)
        per_token[r] = floor
    return interpolate(per_token, t_max)


def verify_ms_by_rows(
    champion,
    rows_measured: Sequence[int],
    repeats: int,
    settings: SamplingSettings = GREEDY,
    context: Sequence[int] = CONTEXT,
) -> Generator[Wait, None, dict[int, float]]:
    """{T: best-of-`repeats` ms of a verify call of T rows at `settings`}: verify_ms for one setting."""
    sweeps = yield from verify_ms(champion, [Case(rows, settings) for rows in rows_measured], repeats, context)
    return {case.rows: min(times) for case, times in sweeps.items()}


def verify_ms(
    champion,
    cases: Sequence[Case],
    repeats: int,
    context: Sequence[int] = CONTEXT,
    settled: Callable[[dict[Case, list[float]]], bool] = lambda sweeps: True,
) -> Generator[Wait, None, dict[Case, list[float]]]:
    """{case: ms of its verify call in each timed sweep} after `context` (rejected drafts: tokens 200.. after
    an unrelated context): `repeats` sweeps, and up to EXTRA_SWEEPS more while `settled(sweeps)` is false;
    each sweep runs every case in turn, so machine drift (a browser's warm-up, a busy neighbour) hits them
    alike, and a first, untimed sweep warms up. The KV cache is forgotten after."""
    yield from settle(champion.prefill(context[:-1]))
    own: tuple[int, ...] = ()
    if any(case.own for case in cases):  # the champion's greedy token after the context
        own = ((yield from settle(champion.verify(verify_request(context, (), 0, GREEDY)))).terminal,)
    sweeps: dict[Case, list[float]] = {case: [] for case in cases}
    for repeat in range(repeats + 1 + EXTRA_SWEEPS):
        if repeat > repeats and settled(sweeps):
            break
        for case in cases:
            lead = own if case.own else ()
            drafts = lead + tuple(200 + i for i in range(case.rows - 1 - len(lead)))
            request = verify_request(context, drafts, repeat, case.settings)
            began = time.perf_counter()
            yield from settle(champion.verify(request))
            if repeat:
                sweeps[case].append((time.perf_counter() - began) * 1000)
    champion.forget()
    return sweeps


def verify_request(
    context: Sequence[int], drafts: tuple[int, ...], repeat: int, settings: SamplingSettings
) -> VerifyRequest:
    """A verify call of point-mass drafts after `context` (seeded by `repeat` when sampling)."""
    return VerifyRequest(
        tuple(context),
        len(context) - 1,
        drafts,
        tuple(PointMass(d) for d in drafts),
        repeat,
        settings,
        None if settings.greedy else SeededDraws(repeat),
    )


def time_draft(
    draft, repeats: int, settings: SamplingSettings = GREEDY, context: Sequence[int] = CONTEXT
) -> Generator[Wait, None, tuple[float, float]]:
    """(step ms, feed ms per token): one-token proposals on `context` cut to len(context) - repeats tokens, then
    growing by a token per call, as a round's does. The step: the best of the `repeats` later calls (the draft
    runtime's step and the proposer's own work on its row: reading the q row, its entropy for the stop). The
    first call, from a fresh cache, feeds the whole cut context (a request's first neural round feeds its
    prompt so): its excess over the step, per token fed beyond one. The draft's cache is emptied before and after."""
    draft.forget()
    start = len(context) - repeats
    times = []
    for repeat in range(repeats + 1):
        draws = None if settings.greedy else SeededDraws(repeat)
        began = time.perf_counter()
        yield from settle(draft.propose(context[: start + repeat], 1, repeat, draws))
        times.append((time.perf_counter() - began) * 1000)
    draft.forget()
    step = min(times[1:])
    return step, max(0.0, times[0] - step) / max(1, start - 1)


def measure_draft_context(
    draft, length: int, step_ms: float, repeats: int = 3, settings: SamplingSettings = GREEDY
) -> Generator[Wait, None, tuple[float, float]]:
    """(draft_key_ms, draft_feed_ms) at `length` context tokens (a key_length): a draft step there against
    step_ms (the step after CONTEXT), per context token beyond len(CONTEXT), and the feed per token of a catch-up
    on that many tokens (time_draft). Policy 17 priced every step at the short context's and no catch-up, and
    took its three one-token neural tries on the page's 1,700-token prompts, where they took 1.2-2.5 s of draft
    time per 32-token answer (bench-p17kv), most of it the first, which fed the prompt."""
    context = tuple(CONTEXT[i % len(CONTEXT)] for i in range(length))  # ids every package's vocabulary holds
    step, feed = yield from time_draft(draft, repeats, settings, context)
    return max(0.0, step - step_ms) / max(1, length - len(CONTEXT)), feed


def fixed_costs(
    verify_ms: Sequence[float], draft_step_ms: float | None, row_ms: float = 0.0, key_ms: Sequence[float] = ()
) -> CostModel:
    """A CostModel from given numbers (tests, and replaying a recorded run)."""
    return CostModel(tuple(float(v) for v in verify_ms), draft_step_ms, float(row_ms), tuple(float(k) for k in key_ms))
