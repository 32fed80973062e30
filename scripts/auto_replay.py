"""Replay a page bench's recorded answers under auto's cost model, offline (a diagnostic, not a test).

    .venv/bin/python scripts/auto_replay.py [--bench build/bench/bench.json] [--setting greedy|sampled]
                                            [--model DIR] [--curve load|live] [--arms lookup-k4,neural-k2,...]
                                            (auto-noext: auto without its confident extension)

Every arm of a bench run gives the same tokens (greedy; and, sampled, none, prompt lookup and auto: their drafts
are point masses, tested by the coupled rule), so one recorded answer per prompt says what every draft of those
arms would have met: a copied token passes if it is the answer's next token. The neural draft's argmax and
entropy at each answer position come from the package's draft run teacher-forced on that answer (greedy only
for the neural and hybrid arms, whose sampled drafts are not point masses). Each round is priced by the bench's
measured cost model for the setting (`--curve load`: auto's load measurement; `--curve live`: the median
verify time by row count over the bench's short-context rounds, which also carries the context the load's
64-token curve leaves out), and auto chooses from the load measurement, as the page does before its live
refinement. Prints each arm's modelled speed-up over none per stratum (median over the stratum's prompts).

What it is for: screening a policy change in seconds before a page bench (an hour). What it leaves out: the
page's noise, live cost refinement, per-round overheads outside the verify call; its ratios are the model's,
not the page's (bench-p19b greedy summary: lookup-k4 1.63 here, 1.87 in the page).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyodide_app.chat_template import ChatTemplate  # noqa: E402
from pyodide_app.costs import CostModel  # noqa: E402
from pyodide_app.proposers.auto import NEURAL_PRIOR, CostPolicy, auto_lookup  # noqa: E402
from pyodide_app.proposers.base import KeepRule  # noqa: E402
from pyodide_app.proposers.hybrid import hybrid_lookup  # noqa: E402
from pyodide_app.proposers.neural import AcceptanceByEntropy  # noqa: E402
from pyodide_app.proposers.prompt_lookup import PromptLookup  # noqa: E402
from pyodide_app.tokenizer import Tokenizer  # noqa: E402
from scripts.draft_calibration import draft_rows  # noqa: E402

NEEDS_DRAFT_ROWS = ("neural", "hybrid", "auto")
NO_EXTENSION = "-noext"  # an arm suffix: auto without its confident extension


@dataclass(frozen=True)
class Answer:
    stratum: str
    prompt: tuple[int, ...]  # rendered chat, token ids
    tokens: tuple[int, ...]  # the recorded answer
    draft: tuple[tuple[int, float], ...]  # (draft argmax, entropy bits) predicting tokens[i]; () if not needed


@dataclass(frozen=True)
class Round:
    proposed: int
    accepted: int
    draft_ms: float  # the proposal (neural: catch-up and steps)


def copied(drafts, answer, position) -> int:
    """Leading drafts equal to the answer's tokens from `position` (the coupled rule's acceptances)."""
    count = 0
    for offset, token in enumerate(drafts):
        if position + offset >= len(answer) or answer[position + offset] != token:
            break
        count += 1
    return count


class Replay:
    """One answer's rounds under one arm: context grows by each round's accepted drafts and one token."""

    def __init__(self, answer: Answer, costs: CostModel, stop_bits: float | None):
        self.answer, self.costs, self.stop_bits = answer, costs, stop_bits
        self.draft_seen = 0  # context tokens in the draft's cache

    def lookup(self, drafts, position) -> Round:
        drafts = drafts[: len(self.answer.tokens) - position]
        return Round(len(drafts), copied(drafts, self.answer.tokens, position), 0.0)

    def neural(self, k: int, position: int, context: int, keep: KeepRule | None = None) -> Round:
        """Up to k draft steps, ending at the first row flatter than the stop or that `keep` declines (auto's
        confident extension); drafts after a wrong one are proposed and rejected, their rows taken as the
        answer's (the rows after a wrong draft are unknown here)."""
        proposed = accepted = 0
        wrong = False
        entropies: list[float] = []
        for offset in range(min(k, len(self.answer.tokens) - position)):
            token, entropy = self.answer.draft[position + offset]
            if self.stop_bits is not None and entropy > self.stop_bits:
                break
            entropies.append(entropy)
            if keep is not None and not keep(entropies):
                break
            proposed += 1
            wrong = wrong or token != self.answer.tokens[position + offset]
            accepted += not wrong
        steps = proposed if proposed == k else proposed + 1
        ms = self.costs.catch_up(max(1, context - self.draft_seen)) + self.costs.draft(steps, context)
        self.draft_seen = context + accepted
        return Round(proposed, accepted, ms)

    def round_ms(self, played: Round, context: int) -> float:
        return played.draft_ms + self.costs.round_ms(played.proposed + 1, played.accepted + 1, context)


def replay_ms(answer: Answer, arm: str, costs: CostModel, policy_costs: CostModel, manifest: dict) -> float:
    """Modelled decode time of `answer` under `arm` (none, lookup-kN, neural-kN, hybrid-kN, auto; auto-noext: auto
    without policy 23's confident extension, whose neural rounds draft past k where the package's acceptance by
    entropy says so)."""
    extend = not arm.endswith(NO_EXTENSION)
    arm = arm.removesuffix(NO_EXTENSION)
    draft = manifest.get("draft") or {}
    run = Replay(answer, costs, draft.get("stop_entropy_bits"))
    name, _, k_text = arm.partition("-k")
    k = int(k_text) if k_text else 8
    lookup = {  # each arm's matcher as the engine builds it
        "auto": auto_lookup(),
        "hybrid": hybrid_lookup(),  # n >= 2: a 1-token match goes to the draft
    }.get(name, PromptLookup())
    policy = None
    if name == "auto":
        end = len(answer.prompt) + len(answer.tokens)
        first, later = draft.get("agreement", NEURAL_PRIOR), draft.get("later_agreement")
        calibration = AcceptanceByEntropy.from_manifest(draft.get("acceptance_by_entropy")) if extend else None
        policy = CostPolicy(policy_costs, first, neural_later=later, answer_end=end, calibration=calibration)
    context, position, total = list(answer.prompt), 0, 0.0
    while position < len(answer.tokens):
        match = lookup.match(context, k) if name in ("lookup", "hybrid", "auto") else None
        if policy is not None:
            pending = max(1, len(context) - run.draft_seen)
            choice = policy.choose(context, k, match, bool(answer.draft), neural_pending=pending)
            source, size, keep = choice.source, choice.cap(k), choice.extend
        elif name == "neural" or (name == "hybrid" and match is None):
            source, size, keep = "neural", k, None
        else:
            source, size, keep = ("prompt_lookup", k, None) if match else ("none", 0, None)
        if source == "prompt_lookup":
            played = run.lookup(match[1][:size], position)
        elif source == "neural":
            played = run.neural(size, position, len(context), keep)
        else:
            played = Round(0, 0, 0.0)
        total += run.round_ms(played, len(context))
        if policy is not None:
            policy.observe(choice, played.proposed, played.accepted)
        context += answer.tokens[position : position + played.accepted + 1]
        position += played.accepted + 1
    return total


def load_answers(bench: dict, setting: str, model: Path, manifest: dict, with_draft: bool) -> list[Answer]:
    """One answer per prompt of the setting (the first repeat's champion-alone answer), with the draft's
    (argmax, entropy bits) predicting each of its tokens when with_draft."""
    tokenizer = Tokenizer.from_json((model / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((model / manifest["chat_template"]).read_text())
    runtime = None
    if with_draft and manifest.get("draft"):
        from pyodide_app.native.onnx_draft import OnnxDraftRuntime

        runtime = OnnxDraftRuntime(model / manifest["draft"]["onnx"], manifest["draft"])
    vocab = tokenizer.vocab_size
    answers = []
    for record in bench["records"]:
        if record["arm"] != "none" or record["setting"] != setting or record["repeat"] != 0 or not record["tokens"]:
            continue
        prompt = tuple(tokenizer.encode(template.render(record["messages"])))
        tokens = tuple(record["tokens"])
        rows = ()
        if runtime:
            rows = tuple((token, entropy) for token, _, entropy in draft_rows(runtime, vocab, prompt, tokens, 0.0))
        answers.append(Answer(record["stratum"], prompt, tokens, rows))
    return answers


def live_curve(bench: dict, setting: str, t_max: int) -> tuple[float, ...]:
    """Median verify ms by row count over the setting's short-context rounds (long_context left out)."""
    samples: dict[int, list[float]] = {}
    for record in bench["records"]:
        if record["setting"] == setting and record["stratum"] != "long_context":
            for rows, timing in record["verify_ms_by_rows"].items():
                samples.setdefault(int(rows), []).extend([timing["median"]] * timing["rounds"])
    curve, floor = [], 0.0
    for rows in range(1, t_max + 1):
        value = statistics.median(samples[rows]) if len(samples.get(rows, ())) >= 3 else floor
        floor = max(floor, value)
        curve.append(floor)
    return tuple(curve)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=ROOT / "build" / "bench" / "bench.json")
    parser.add_argument("--setting", choices=("greedy", "sampled"), default="greedy")
    parser.add_argument("--model", type=Path, default=ROOT / "web" / "model")
    parser.add_argument("--curve", choices=("load", "live"), default="load")
    parser.add_argument("--arms", default="lookup-k2,lookup-k4,neural-k2,hybrid-k4,auto")
    args = parser.parse_args()
    arms = args.arms.split(",")
    if args.setting == "sampled" and any(arm.startswith(("neural", "hybrid")) for arm in arms):
        parser.error("neural and hybrid sample their drafts at T > 0: replay them greedy only")
    bench = json.loads(args.bench.read_text())
    measured = bench["auto"][args.setting]["measured_costs"]
    load = CostModel(
        tuple(measured["verify_ms"]),
        measured["draft_step_ms"],
        measured["row_ms"],
        draft_feed_ms=measured["draft_feed_ms"],
    )
    paid = load
    if args.curve == "live":
        paid = CostModel(
            live_curve(bench, args.setting, len(load.verify_ms)),
            load.draft_step_ms,
            load.row_ms,
            draft_feed_ms=load.draft_feed_ms,
        )
    with_draft = any(arm.startswith(NEEDS_DRAFT_ROWS) for arm in arms)
    manifest = json.loads((args.model / "manifest.json").read_text())
    answers = load_answers(bench, args.setting, args.model, manifest, with_draft)
    ratios: dict[str, dict[str, list[float]]] = {}
    for answer in answers:
        none = replay_ms(answer, "none", paid, load, {})
        for arm in arms:
            ratio = none / replay_ms(answer, arm, paid, load, manifest)
            ratios.setdefault(answer.stratum, {}).setdefault(arm, []).append(ratio)
    print(f"{args.setting}, costs paid: {args.curve} {[round(v, 1) for v in paid.verify_ms]}")
    print("| stratum | " + " | ".join(arms) + " |")
    print("|---" * (len(arms) + 1) + "|")
    for stratum, by_arm in sorted(ratios.items()):
        print(f"| {stratum} | " + " | ".join(f"{statistics.median(by_arm[arm]):.2f}" for arm in arms) + " |")


if __name__ == "__main__":
    main()
