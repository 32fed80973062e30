"""Exact enumeration of every execution branch of the real round loop.

`ScriptedDraws` replaces the Philox draws: it follows a script of choices and
records the alternatives at each choice point, with exact probabilities. A
depth-first search over scripts visits every branch of a round exactly once.
`output_distribution` then pushes a distribution over request states through
successive rounds (merging equal states) until every branch has finished, and
returns P(output sequence) as Fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Hashable, Sequence

from pyodide_app.champion import LogitsModel
from pyodide_app.orchestrator import Orchestrator
from pyodide_app.processors import SamplingSettings, process_row
from pyodide_app.proposers.base import Proposer
from pyodide_app.stops import StopPolicy
from pyodide_app.transaction import RequestState


def _exact(p) -> Fraction:
    if not isinstance(p, (int, Fraction)):
        raise TypeError(f"enumeration needs exact probabilities, got {type(p).__name__} {p!r}")
    return Fraction(p)


class ScriptedDraws:
    def __init__(self, script: Sequence[Hashable]):
        self.script = script
        self.taken: list = []
        self.alternatives: list[list] = []
        self.weight = Fraction(1)

    def _choose(self, options: list[tuple[Hashable, Fraction]]):
        depth = len(self.taken)
        value = self.script[depth] if depth < len(self.script) else options[0][0]
        self.weight *= dict(options)[value]
        self.taken.append(value)
        self.alternatives.append([v for v, _ in options])
        return value

    def categorical(self, domain, round_index, position, probs) -> int:
        exact = [_exact(p) for p in probs]
        total = sum(exact)
        return self._choose([(i, p / total) for i, p in enumerate(exact) if p > 0])

    def bernoulli(self, domain, round_index, position, prob) -> bool:
        prob = _exact(prob)
        options = ([(True, prob)] if prob > 0 else []) + ([(False, 1 - prob)] if prob < 1 else [])
        return self._choose(options)


class FloatScriptedDraws(ScriptedDraws):
    """ScriptedDraws over float probabilities: float64 laws of float rows (power computations)."""

    def categorical(self, domain, round_index, position, probs) -> int:
        total = math.fsum(probs)
        return self._choose([(i, p / total) for i, p in enumerate(probs) if p > 0])

    def bernoulli(self, domain, round_index, position, prob) -> bool:
        options = ([(True, prob)] if prob > 0 else []) + ([(False, 1 - prob)] if prob < 1 else [])
        return self._choose(options)


def enumerate_branches(run: Callable[[ScriptedDraws], Hashable], draws_type=ScriptedDraws) -> dict[Hashable, Fraction]:
    """Sum of branch weights per result of `run`, over every branch of its choices."""
    results: dict[Hashable, Fraction] = {}
    pending: list[tuple] = [()]
    while pending:
        script = pending.pop()
        draws = draws_type(script)
        result = run(draws)
        results[result] = results.get(result, Fraction(0)) + draws.weight
        for depth in range(len(script), len(draws.taken)):
            for alternative in draws.alternatives[depth][1:]:
                pending.append(tuple(draws.taken[:depth]) + (alternative,))
    return results


def round_distribution(
    orchestrator: Orchestrator, proposer: Proposer, stops: StopPolicy, start: RequestState, draws_type=ScriptedDraws
):
    def run(draws: ScriptedDraws):
        orchestrator.draws = draws
        commit = orchestrator.round(start, proposer, stops)
        return commit.successor

    return enumerate_branches(run, draws_type)


def output_distribution(
    orchestrator: Orchestrator, proposer: Proposer, prompt: Sequence[int], draws_type=ScriptedDraws
) -> dict[tuple, Fraction]:
    """P(output tokens) of a whole request, by exact enumeration of the real round loop."""
    prompt = orchestrator.validate_prompt(prompt)
    stops = orchestrator.stop_policy(len(prompt))
    live = {RequestState.start(prompt, orchestrator.config.k): Fraction(1)}
    done: dict[tuple, Fraction] = {}
    while live:
        merged: dict[tuple, tuple[RequestState, Fraction]] = {}
        for state, mass in live.items():
            for successor, p in round_distribution(orchestrator, proposer, stops, state, draws_type).items():
                if successor.finish_reason is not None:
                    done[successor.output] = done.get(successor.output, Fraction(0)) + mass * p
                    continue
                # The enumerating draws ignore RNG counters, so states with equal
                # context behave identically from here on: merge them.
                key = successor.context
                kept, total = merged.get(key, (successor, Fraction(0)))
                merged[key] = (kept, total + mass * p)
        live = {state: mass for state, mass in merged.values()}
    return done


def chain_rule_joint(
    target: LogitsModel, settings: SamplingSettings, prompt: tuple, horizon: int, eos_ids: frozenset, ops
) -> dict[tuple, Fraction | float]:
    """P(output) as the direct product of processed target rows: the champion's law,
    computed without the round loop. Sequences end at an EOS or at `horizon` tokens."""
    joint: dict[tuple, Fraction | float] = {}
    frontier: dict[tuple, Fraction | float] = {(): 1}
    while frontier:
        grown = {}
        for output, mass in frontier.items():
            context = tuple(prompt) + output
            row = process_row(target.logits(context), settings, context, ops)
            for token, p in enumerate(row):
                if p == 0:
                    continue
                extended = output + (token,)
                if token in eos_ids or len(extended) == horizon:
                    joint[extended] = joint.get(extended, 0) + mass * p
                else:
                    grown[extended] = mass * p
        frontier = grown
    return joint
