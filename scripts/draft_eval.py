"""The neural draft on prompts it was not made from: build_tools/draft_eval_independent.json (written by hand,
never trained on: tests/test_draft_eval.py), teacher-forced on the champion's own greedy answers, natively
(the float32 CPU champion, the draft on onnxruntime).

At each answer position t, with the champion's row p and the draft's q (both after the answer so far):
  greedy agreement     1 if the draft's temperature-0 token is the champion's greedy token;
  ... after agreement  the same at t + 1 given agreement at t, counting a row above the draft's entropy stop as
                       a miss (what a second draft token of a round meets: the auto scheduler's later prior);
  sampled acceptance   sum_x min(p(x), q(x)) at the bench's sampled settings (temperature 0.7, top-p 0.9 for
                       the champion, temperature 0.7 for the draft): the chance a drafted token is accepted.
Prints per kind and overall; --write records the result in the draft's provenance.json.

    .venv/bin/python scripts/draft_eval.py [--model DIR] [--tokens 48] [--write DRAFT_DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.eval_set import INDEPENDENT, independent_items, independent_sha256  # noqa: E402
from build_tools.recipes import default_package  # noqa: E402
from pyodide_app.native.loader import load_engine  # noqa: E402
from pyodide_app.processors import process_row  # noqa: E402
from scripts.draft_calibration import SAMPLED, answer_rows, draft_rows, greedy_answer  # noqa: E402


def item_points(engine, messages: list[dict], tokens: int) -> list[tuple[float, float, bool]]:
    """(greedy agreement, sampled acceptance, under the entropy stop) at each position of the champion's greedy
    answer."""
    ids = engine.encode_prompt(messages)
    answer = greedy_answer(engine, messages, tokens)
    if not answer:
        return []
    logits = answer_rows(engine, ids, answer)
    vocab = engine.champion.vocab_size
    greedy = draft_rows(engine.draft_runtime, vocab, ids, answer, 0.0)
    sampled = draft_rows(engine.draft_runtime, vocab, ids, answer, SAMPLED.temperature)
    points = []
    for t, token in enumerate(answer):
        p = np.asarray(process_row(logits[t], SAMPLED, ids + answer[:t]), np.float64)
        under_stop = engine.stop_bits is None or greedy[t][2] <= engine.stop_bits
        points.append((float(greedy[t][0] == token), float(np.minimum(p, sampled[t][1]).sum()), under_stop))
    return points


def after_agreement(items: list[list[tuple[float, float, bool]]]) -> tuple[int, int]:
    """(positions t + 1 agreed and under the stop, positions t agreed and under the stop), over consecutive
    positions of each item: how often a round's next draft token passes once its previous one did."""
    hits = tries = 0
    for points in items:
        for (agreed, _, under_stop), (next_agreed, _, next_under_stop) in zip(points, points[1:]):
            passed = bool(agreed) and under_stop
            tries += passed
            hits += passed and bool(next_agreed) and next_under_stop
    return hits, tries


def summary(points: list[tuple[float, float, bool]]) -> dict:
    return {
        "tokens": len(points),
        "greedy": float(np.mean([g for g, _, _ in points])),
        "sampled": float(np.mean([s for _, s, _ in points])),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--write", type=Path, help="a draft folder whose provenance.json gets the result")
    args = parser.parse_args()
    engine = load_engine(args.model or default_package(), backend="cpu")
    items = independent_items()
    by_kind: dict[str, list] = defaultdict(list)
    per_item = []
    started = time.perf_counter()
    for item in items:
        points = item_points(engine, item["messages"], args.tokens)
        by_kind[item["kind"]] += points
        per_item.append(points)
        print(f"{item['id']}: {len(points)} tokens, greedy {np.mean([g for g, _, _ in points]):.2f}", flush=True)
    everything = [p for points in by_kind.values() for p in points]
    hits, tries = after_agreement(per_item)
    result = {
        "file": str(INDEPENDENT.relative_to(ROOT)),
        "sha256": independent_sha256(),
        "prompts": len(items),
        "tokens": len(everything),
        "greedy_agreement": float(np.mean([g for g, _, _ in everything])),
        "greedy_agreement_after_agreement": hits / tries,
        "after_agreement_positions": tries,
        "sampled_acceptance_t0_7": float(np.mean([s for _, s, _ in everything])),
        "per_kind": {kind: summary(points) for kind, points in sorted(by_kind.items())},
        "measured_by": f"scripts/draft_eval.py --tokens {args.tokens} ({time.strftime('%Y-%m-%d')}): teacher-forced "
        "on the champion's greedy answers; sampled = sum min(p, q) at temperature 0.7, top-p 0.9",
    }
    print("\n| kind | tokens | greedy agreement | sampled acceptance (T 0.7) |\n|---|---|---|---|")
    for kind, row in result["per_kind"].items():
        print(f"| {kind} | {row['tokens']} | {row['greedy']:.3f} | {row['sampled']:.3f} |")
    print(f"| all | {result['tokens']} | {result['greedy_agreement']:.3f} | {result['sampled_acceptance_t0_7']:.3f} |")
    print(f"greedy agreement after an agreeing position (under the stop): {hits}/{tries} = {hits / tries:.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.write:
        path = args.write / "provenance.json"
        provenance = json.loads(path.read_text())
        provenance["independent_evaluation"] = result
        path.write_text(json.dumps(provenance, indent=1) + "\n")
        print(f"-> {path}")


if __name__ == "__main__":
    main()
