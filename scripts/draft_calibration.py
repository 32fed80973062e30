"""Is the draft's uncertainty a guide to acceptance? Acceptance of the package's neural draft against its
entropy, teacher-forced on the champion's own greedy answers to the bench prompts (the positions a draft
drafts at in practice), natively (the float32 CPU champion, the draft on onnxruntime).

At each answer position t, with the champion's row p and the draft's q (both after the answer so far):
  greedy acceptance   1 if the draft's temperature-0 token equals the champion's greedy token, else 0;
  sampled acceptance  sum_x min(p(x), q(x)) with p and q at the bench's sampled settings (temperature 0.7,
                      top-p 0.9 for the champion): the probability that a drafted token is accepted;
  entropy             H(q) in bits of the draft at temperature 1 (its own uncertainty).
Positions are binned by entropy; the table and docs/bench/calibration.png show mean acceptance per bin.

    .venv/bin/python scripts/draft_calibration.py [--model DIR] [--tokens 48] [--strata a,b] [--out docs/bench]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.recipes import default_package  # noqa: E402
from pyodide_app.native.loader import load_engine  # noqa: E402
from pyodide_app.processors import SamplingSettings, process_row  # noqa: E402
from pyodide_app.waits import finish  # noqa: E402

SAMPLED = SamplingSettings(temperature=0.7, top_p=0.9)
BINS = [0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, math.inf]  # entropy bin edges, bits


def greedy_answer(engine, messages: list[dict], tokens: int) -> list[int]:
    request = {"messages": messages, "max_tokens": tokens, "temperature": 0, "speculative": {"proposer": "none"}}
    return list(engine.chat(request))[-1]["tokens"]


def answer_rows(engine, ids: list[int], answer: list[int]) -> list:
    """The champion's raw logits row before each answer token, teacher-forced after the prompt `ids`."""
    return finish(engine.champion.score(ids[:-1], [ids[-1]] + answer[:-1]))


def draft_rows(draft, vocab: int, prompt_ids: list[int], answer: list[int], temperature: float) -> list:
    """(the draft's token, its q dense over the vocabulary, the entropy its graph reports) before each answer
    token, teacher-forced."""
    draft.reset()
    rows = []
    step = draft.step(prompt_ids, temperature, 0.5)
    for t in range(len(answer)):
        rows.append((step.token, np.asarray(step.row.dense(vocab), np.float64), step.entropy_bits))
        if t + 1 < len(answer):
            step = draft.step([answer[t]], temperature, 0.5)
    return rows


def positions(engine, prompt: str, tokens: int) -> list[dict]:
    messages = [{"role": "user", "content": prompt}]
    ids = engine.encode_prompt(messages)
    answer = greedy_answer(engine, messages, tokens)
    if not answer:
        return []
    logits = answer_rows(engine, ids, answer)
    vocab = engine.champion.vocab_size
    greedy = draft_rows(engine.draft_runtime, vocab, ids, answer, 0.0)
    sampled = draft_rows(engine.draft_runtime, vocab, ids, answer, SAMPLED.temperature)
    out = []
    for t, token in enumerate(answer):
        history = ids + answer[:t]
        p = np.asarray(process_row(logits[t], SAMPLED, history), np.float64)
        q = sampled[t][1]
        out.append(
            {
                "entropy_bits": greedy[t][2],  # what the neural proposer's stop reads (T = 1)
                "greedy_accept": int(greedy[t][0] == token),
                "sampled_accept": float(np.minimum(p, q).sum()),
            }
        )
    return out


def table(points: list[dict]) -> list[dict]:
    rows = []
    for low, high in zip(BINS, BINS[1:]):
        inside = [p for p in points if low <= p["entropy_bits"] < high]
        if inside:
            rows.append(
                {
                    "bin": f"{low:g}–{high:g}" if high != math.inf else f"≥ {low:g}",
                    "positions": len(inside),
                    "greedy": sum(p["greedy_accept"] for p in inside) / len(inside),
                    "sampled": sum(p["sampled_accept"] for p in inside) / len(inside),
                }
            )
    return rows


def plot(rows: list[dict], points: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(figsize=(7, 4))
    labels = [r["bin"] for r in rows]
    x = np.arange(len(rows))
    axes.plot(x, [r["greedy"] for r in rows], "o-", label="greedy: draft token = champion's")
    axes.plot(x, [r["sampled"] for r in rows], "s-", label="sampled (T 0.7, top-p 0.9): Σ min(p, q)")
    for i, r in enumerate(rows):
        axes.annotate(str(r["positions"]), (i, 0.02), ha="center", fontsize=8, color="gray")
    axes.set_xticks(x, labels)
    axes.set_xlabel("draft entropy H(q) at temperature 1, bits (gray: positions per bin)")
    axes.set_ylabel("acceptance")
    axes.set_ylim(0, 1.05)
    axes.set_title(f"Draft calibration: acceptance vs draft entropy ({points} positions)")
    axes.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--strata", help="comma-separated subset of build_tools/bench_prompts.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    args = parser.parse_args()
    engine = load_engine(args.model or default_package(), backend="cpu")
    strata = json.loads((ROOT / "build_tools" / "bench_prompts.json").read_text())["strata"]
    chosen = args.strata.split(",") if args.strata else list(strata)
    points = []
    for name in chosen:
        for prompt in strata[name]:
            found = positions(engine, prompt, args.tokens)
            points += found
            greedy = sum(p["greedy_accept"] for p in found) / max(1, len(found))
            print(f"{name}: {len(found)} positions, greedy acceptance {greedy:.2f}", flush=True)
    rows = table(points)
    print("\n| draft entropy (bits) | positions | greedy acceptance | sampled acceptance |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['bin']} | {r['positions']} | {r['greedy']:.2f} | {r['sampled']:.2f} |")
    greedy = sum(p["greedy_accept"] for p in points) / len(points)
    sampled = sum(p["sampled_accept"] for p in points) / len(points)
    print(f"| all | {len(points)} | {greedy:.2f} | {sampled:.2f} |")
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, len(points), args.out / "calibration.png")
    print(f"-> {args.out / 'calibration.png'}")


if __name__ == "__main__":
    main()
