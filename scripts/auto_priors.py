"""The auto scheduler's priors, measured: how often a first draft is accepted, per source and setting.

Teacher-forced on the champion's own answers (greedy, and sampled at the bench's settings: temperature
0.7, top-p 0.9) to the draft's held-out evaluation prompts (build_tools/distill_prompts.py) and to long
inputs from the found prompt set (build_tools/distill_found.py: documentation to summarise or explain,
300-900 prompt tokens) — not the bench workload, so the bench stays an independent check — natively (the
float32 CPU champion, the draft on onnxruntime). At each answer position t, with the champion's row p
(after the answer so far):

  prompt lookup, match length n, continuation c_1..   greedy: 1 if c_j is the champion's greedy token;
                                                      sampled: p(c_j), the probability it is accepted;
                                                      position j > 1 only along answers where c_1..c_{j-1}
                                                      were the tokens emitted (conditional rate a_j);
  neural draft (only positions its entropy stop       greedy: 1 if its temperature-0 token is the champion's;
  lets through: H(q) at T = 1 <= stop bits)           sampled: sum_x min(p(x), q(x)) (its sampled token, the
                                                      textbook test: neural, hybrid), and p(argmax q) (its
                                                      argmax as a point mass, the coupled test: auto).

    .venv/bin/python scripts/auto_priors.py [--tokens 48] [--per-task 3] [--long 12]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.distill_found import found_prompts  # noqa: E402
from build_tools.distill_prompts import evaluation_prompts  # noqa: E402
from build_tools.recipes import default_package  # noqa: E402
from pyodide_app.native.loader import load_engine  # noqa: E402
from pyodide_app.processors import SamplingSettings, process_row  # noqa: E402
from pyodide_app.proposers.auto import auto_lookup  # noqa: E402
from scripts.draft_calibration import answer_rows, draft_rows  # noqa: E402

SETTINGS = {"greedy": SamplingSettings(temperature=0.0), "sampled": SamplingSettings(temperature=0.7, top_p=0.9)}
POSITIONS = 4


def answer(engine, prompt: str, tokens: int, setting: str) -> list[int]:
    sampling = {"temperature": 0} if setting == "greedy" else {"temperature": 0.7, "top_p": 0.9, "seed": 7}
    request = {"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens, **sampling}
    return list(engine.chat({**request, "speculative": {"proposer": "none"}}))[-1]["tokens"]


def accept(row: list[float], token: int, setting: str, history: list[int]) -> float:
    """P(a point-mass draft `token` is accepted) at this row: greedy 0/1, sampled p(token)."""
    return float(process_row(row, SETTINGS[setting], history)[token])


def lookup_points(ids, tokens, rows, setting, out) -> None:
    """out[(n, j)] += acceptance of draft position j of the lookup match at each answer position."""
    lookup = auto_lookup()
    for t in range(len(tokens)):
        context = ids + tokens[:t]
        match = lookup.match(context, POSITIONS)
        if match is None:
            continue
        n, continuation = match
        for j, token in enumerate(continuation):
            if t + j >= len(tokens):
                break
            out[(n, j + 1)].append(accept(rows[t + j], token, setting, context + tokens[t : t + j]))
            if tokens[t + j] != token:  # the next position is conditional on this one being emitted
                break


def neural_points(engine, ids, tokens, rows, setting, out) -> None:
    """out[setting] += the neural draft's acceptance at positions its entropy stop lets through."""
    vocab, stop = engine.champion.vocab_size, engine.stop_bits
    own = draft_rows(engine.draft_runtime, vocab, ids, tokens, SETTINGS[setting].temperature)
    plain = draft_rows(engine.draft_runtime, vocab, ids, tokens, 1.0)
    for t in range(len(tokens)):
        q1 = plain[t][1][plain[t][1] > 0]
        if stop is not None and float(-(q1 * np.log2(q1)).sum()) > stop:
            continue
        if setting == "greedy":  # the stopping draft takes its temperature-1 row's argmax
            out[setting].append(float(int(np.argmax(plain[t][1])) == tokens[t]))
        else:
            p = np.asarray(process_row(rows[t], SETTINGS[setting], ids + tokens[:t]), np.float64)
            out[setting].append(float(np.minimum(p, own[t][1]).sum()))
            out[f"{setting}, argmax"].append(float(p[int(np.argmax(plain[t][1]))]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--per-task", type=int, default=3)
    parser.add_argument("--long", type=int, default=12, help="long found prompts (half 'long', half 'text')")
    args = parser.parse_args()
    engine = load_engine(args.model or default_package(), backend="cpu")
    lookup = {s: defaultdict(list) for s in SETTINGS}
    neural: dict[str, list[float]] = defaultdict(list)
    found = found_prompts()
    longs = [f for f in found if f["task"] == "long"][: args.long // 2]
    longs += [f for f in found if f["task"] == "text"][: args.long - len(longs)]
    prompts = evaluation_prompts(args.per_task) + longs
    for i, item in enumerate(prompts):
        ids = engine.encode_prompt([{"role": "user", "content": item["prompt"]}])
        for setting in SETTINGS:
            tokens = answer(engine, item["prompt"], args.tokens, setting)
            if not tokens:
                continue
            rows = answer_rows(engine, ids, tokens)
            lookup_points(ids, tokens, rows, setting, lookup[setting])
            neural_points(engine, ids, tokens, rows, setting, neural)
        print(f"{i + 1}/{len(prompts)} {item['id']}", flush=True)
    print(f"\n{len(prompts)} prompts, {args.tokens} tokens each")
    print("| source | setting | n | position | points | acceptance |\n|---|---|---|---|---|---|")
    for setting, table in lookup.items():
        for (n, j), values in sorted(table.items()):
            print(f"| lookup | {setting} | {n} | {j} | {len(values)} | {np.mean(values):.3f} |")
    for setting, values in neural.items():
        print(f"| neural (stop {engine.stop_bits} bits) | {setting} | — | 1 | {len(values)} | {np.mean(values):.3f} |")


if __name__ == "__main__":
    main()
