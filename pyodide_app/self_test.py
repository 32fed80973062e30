"""Is it exact on this device? Four checks of the champion in use against what the package's build recorded
(golden.json, build_tools/golden.py), run on the user's own adapter (engine.selfTest, the page's button):

  batch_invariance  the same rows scored in calls of T = 1..T_max rows are bitwise identical (what makes
                    speculative greedy output equal champion-alone output token for token);
  golden_greedy     the package's greedy golden tokens, reproduced token for token (verify calls whose drafts
                    are the golden continuation: each round must accept them all and add the next one);
  philox            the device's Philox4x32-10 words for the recorded (counter, key) pairs (Random123's
                    published known answers among them);
  verify_fixtures   the verify kernel's decisions on recorded fixtures (sparse logits, drafts, settings, seed).

A fixture is JSON: {"rows": [[[token, logit], ...] per row], "floor": logit of every other token,
"context", "drafts", "q": null | "point" | [[[token, prob], ...] per draft], "settings", "seed", "round",
"expected": {"accepted", "terminal", "kind"}}. Tokens are taken modulo the vocabulary.
"""

from __future__ import annotations

import time
from array import array
from typing import Generator, Sequence

from .acceptance import FullRow, PointMass
from .champion import VerifyRequest
from .processors import SamplingSettings
from .sampling import SeededDraws
from .waits import Wait, settle

CHECKS = ("batch_invariance", "golden_greedy", "philox", "verify_fixtures")


def fixture_request(case: dict, vocab: int) -> tuple[list[list[float]], VerifyRequest]:
    """The logits rows [T][vocab] and the VerifyRequest a fixture describes."""
    rows = []
    for sparse in case["rows"]:
        row = [float(case["floor"])] * vocab
        for token, logit in sparse:
            row[token % vocab] = float(logit)
        rows.append(row)
    drafts = tuple(d % vocab for d in case["drafts"])
    if case["q"] == "point":
        q_rows = tuple(PointMass(d) for d in drafts)
    elif case["q"]:
        q_rows = []
        for sparse in case["q"]:
            probs = [0.0] * vocab
            for token, prob in sparse:
                probs[token % vocab] = float(prob)
            q_rows.append(FullRow(probs))
        q_rows = tuple(q_rows)
    else:
        q_rows = ()
    settings = SamplingSettings(**case["settings"]).validate()
    context = tuple(t % vocab for t in case["context"])
    draws = None if settings.greedy else SeededDraws(case["seed"])
    return rows, VerifyRequest(context, len(context) - 1, drafts, q_rows, case["round"], settings, draws)


def f32_bytes(row: Sequence[float] | bytes) -> bytes:
    return row if isinstance(row, (bytes, bytearray, memoryview)) else array("f", row).tobytes()


def batch_invariance(champion, golden: dict, t_max: int) -> Generator[Wait, None, tuple[bool, str]]:
    """Score the first golden prompt's continuation in calls of T = 1..t_max rows after the prompt; every
    row must equal, bit for bit, the same row of the t_max-row call."""
    case = golden["cases"][0]
    context = list(case["prompt_ids"])
    tokens = (list(case["greedy"]) * t_max)[:t_max]
    widest = [f32_bytes(r) for r in (yield from settle(champion.score(context, tokens)))]
    compared = 0
    for rows in range(1, t_max):
        scored = yield from settle(champion.score(context, tokens[:rows]))
        for i, row in enumerate(scored):
            compared += 1
            if f32_bytes(row) != widest[i]:
                return False, f"row {i} scored in a {rows}-row call differs from the same row in a {t_max}-row call"
    return True, f"{compared} rows scored in calls of 1..{t_max - 1} rows equal the {t_max}-row call bit for bit"


def golden_greedy(champion, golden: dict, t_max: int) -> Generator[Wait, None, tuple[bool, str]]:
    """Each case's greedy tokens through verify calls that draft the golden continuation itself."""
    settings = SamplingSettings(temperature=0)
    total = 0
    for number, case in enumerate(golden["cases"]):
        expected = list(case["greedy"])
        produced: list[int] = []
        round_index = 0
        while len(produced) < len(expected):
            drafts = tuple(expected[len(produced) : len(produced) + t_max - 1][: len(expected) - len(produced) - 1])
            context = tuple(case["prompt_ids"]) + tuple(produced)
            request = VerifyRequest(context, len(context) - 1, drafts, (), round_index, settings)
            decision = yield from settle(champion.verify(request))
            produced += list(drafts[: decision.accepted]) + [decision.terminal]
            round_index += 1
            for position, (want, got) in enumerate(zip(expected, produced)):
                if want != got:
                    where = f"prompt {number + 1}, token {position + 1}"
                    return False, f"{where}: the package recorded token {want}, this device chose {got}"
        total += len(expected)
    return True, f"{total} greedy tokens of {len(golden['cases'])} prompts reproduced"


def philox(champion, golden: dict, t_max: int) -> Generator[Wait, None, tuple[bool, str]]:
    cases = golden["philox"]
    words = yield from settle(champion.philox_words([(tuple(c["counter"]), tuple(c["key"])) for c in cases]))
    for number, (case, got) in enumerate(zip(cases, words, strict=True)):
        if tuple(got) != tuple(case["words"]):
            return False, f"case {number + 1}: expected {[hex(w) for w in case['words']]}, got {[hex(w) for w in got]}"
    return True, f"{len(cases)} Philox4x32-10 blocks equal the recorded words"


def verify_fixtures(champion, golden: dict, t_max: int) -> Generator[Wait, None, tuple[bool, str]]:
    cases = golden["verify"]
    for number, case in enumerate(cases):
        rows, request = fixture_request(case, champion.vocab_size)
        decision = yield from settle(champion.verify_logits(rows, request))
        got = {"accepted": decision.accepted, "terminal": decision.terminal, "kind": decision.kind}
        if got != case["expected"]:
            return False, f"fixture {number + 1} ({case['name']}): expected {case['expected']}, got {got}"
    return True, f"{len(cases)} verify decisions equal the recorded ones"


CHECK_FUNCTIONS = {
    "batch_invariance": batch_invariance,
    "golden_greedy": golden_greedy,
    "philox": philox,
    "verify_fixtures": verify_fixtures,
}
NEEDS = {"batch_invariance": "cases", "golden_greedy": "cases", "philox": "philox", "verify_fixtures": "verify"}


def run_self_test(champion, golden: dict | None, t_max: int) -> Generator[Wait, None, dict]:
    """{"passed", "seconds", "checks": [{"name", "passed", "detail", "seconds"}]}. A check whose recorded
    values the package lacks (an older build) fails and says so; an exception fails its check only.
    The champion's cached rows are dropped afterwards: the next request prefills from position 0."""
    began = time.perf_counter()
    checks = []
    for name in CHECKS:
        started = time.perf_counter()
        if not golden or not golden.get(NEEDS[name]):
            passed, detail = False, f"the model package has no recorded {NEEDS[name]!r} values (rebuild it)"
        else:
            try:
                passed, detail = yield from CHECK_FUNCTIONS[name](champion, golden, t_max)
            except Exception as error:  # a device error, a numeric refusal: this check fails, the others run
                passed, detail = False, f"{type(error).__name__}: {error}"
        checks.append({"name": name, "passed": passed, "detail": detail, "seconds": time.perf_counter() - started})
    champion.forget()
    passed = all(c["passed"] for c in checks)
    return {"passed": passed, "checks": checks, "seconds": time.perf_counter() - began}
