"""How far the CPU champion is from batch invariance, on the real model: the float32 graph (default; the
package's champion_cpu.onnx with weights from the shards) or, with --compact, champion.onnx (MatMulNBits).

For each prompt: greedy decoding with one row per call (what champion-alone does), then the same
sequence re-scored the way speculation scores it, k + 1 = 5 rows per call. Reports the largest logit
difference between a row scored alone and in a 5-row call, and how often the greedy token (argmax)
differs, with the top-1/top-2 margin where it does. A flipped argmax is where greedy speculation on
the CPU path can leave champion-alone's answer.

    .venv/bin/python scripts/cpu_batch_invariance.py [--prompts-per-task 20] [--tokens 16] [--compact] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_tools.distill_prompts import evaluation_prompts
from build_tools.recipes import default_package
from pyodide_app.chat_template import ChatTemplate
from pyodide_app.native.dense_champion import open_runtime
from pyodide_app.tokenizer import Tokenizer

ROWS = 5  # k = 4 drafts + the frontier


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts-per-task", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--compact", action="store_true", help="champion.onnx (MatMulNBits) instead of the float32 graph"
    )
    args = parser.parse_args()
    folder = default_package()
    manifest = json.loads((folder / "manifest.json").read_text())
    tokenizer = Tokenizer.from_json((folder / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((folder / manifest["chat_template"]).read_text())
    runtime = open_runtime(folder, manifest, compact=args.compact)
    prompts = evaluation_prompts(args.prompts_per_task)
    worst, positions, flips, flip_margins, margins = 0.0, 0, 0, [], []
    started = time.perf_counter()
    for number, item in enumerate(prompts, 1):
        prompt = tokenizer.encode(template.render([{"role": "user", "content": item["prompt"]}]))
        runtime.truncate(0)
        single = [runtime.run_array(prompt)[-1]]  # the row after the prompt
        answer = []
        for _ in range(args.tokens - 1):  # champion-alone: one row per call
            answer.append(int(np.argmax(single[-1])))
            single.append(runtime.run_array([answer[-1]])[0])
        answer.append(int(np.argmax(single[-1])))
        runtime.truncate(len(prompt) - 1)
        batched = []
        sequence = [prompt[-1]] + answer[:-1]  # inputs whose rows score the answer tokens
        for start in range(0, len(sequence), ROWS):
            batched.extend(runtime.run_array(sequence[start : start + ROWS]))
        for alone, together in zip(single, batched):
            positions += 1
            worst = max(worst, float(np.abs(alone - together).max()))
            top2 = np.sort(alone)[-2:]
            margins.append(float(top2[1] - top2[0]))
            if int(np.argmax(alone)) != int(np.argmax(together)):
                flips += 1
                flip_margins.append(margins[-1])
        if number % 10 == 0:
            print(
                f"{number}/{len(prompts)} prompts, {positions} positions, {flips} argmax flips, "
                f"max |diff| {worst:.2e}, {time.perf_counter() - started:.0f} s",
                flush=True,
            )
    result = {
        "prompts": len(prompts),
        "positions": positions,
        "rows_per_call": ROWS,
        "max_abs_logit_diff": worst,
        "argmax_flips": flips,
        "flip_margins": flip_margins,
        "positions_with_margin_below": {str(m): int(sum(x < m for x in margins)) for m in (1e-4, 1e-3, 1e-2)},
        "seconds": time.perf_counter() - started,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
