"""Champion answers for distillation: resumable, incremental, out of git.

The champion runs as the package's champion.onnx on onnxruntime (the fastest exact path natively:
the same graph the browser's CPU fallback runs), one answer at a time with its KV cache. Per answer
position we keep the token and the champion's top-K logits (the distillation target).

Layout of DIR (grows across runs; nothing is rewritten):
    index.jsonl          one line per answer: id, task, mode, shard, row range, prompt/answer lengths
    shard-NNNNN.npz      sequences (prompt + answer token ids), top_ids / top_logits per answer position
A shard is written to a temporary name and renamed before its index lines are appended, so an
interrupted run loses at most the answers of one unfinished shard and resumes after the last one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

TOP_K = 32
SHARD_ANSWERS = 16
MODES = {"greedy": (0.0, 1.0), "sampled": (0.8, 0.95)}  # temperature, top-p


class ChampionAnswerer:
    """champion.onnx (the native CPU champion's runtime); greedy or sampled answers with their top-K logits."""

    def __init__(self, package: Path):
        from pyodide_app.native.onnx_champion import open_runtime

        manifest = json.loads((package / "manifest.json").read_text())
        if not manifest.get("fallback"):
            raise SystemExit(f"distill: {package} has no champion.onnx (build it without --no-fallback)")
        self.runtime = open_runtime(package, manifest)
        self.eos = set(manifest["generation"]["eos_ids"])

    def answer(self, prompt: list[int], max_tokens: int, mode: str, rng: np.random.Generator):
        """-> (answer ids, top_ids [n, K] int32, top_logits [n, K] float16)."""
        temperature, top_p = MODES[mode]
        self.runtime.reset()
        logits = self.runtime.run_array(prompt)[-1]  # the last row: logits for the next token
        tokens, top_ids, top_logits = [], [], []
        for _ in range(max_tokens):
            ids = np.argpartition(-logits, TOP_K)[:TOP_K]
            ids = ids[np.argsort(-logits[ids])]
            top_ids.append(ids.astype(np.int32))
            top_logits.append(logits[ids].astype(np.float16))
            token = int(ids[0]) if temperature == 0 else sample_top_p(logits, temperature, top_p, rng)
            tokens.append(token)
            if token in self.eos:
                break
            logits = self.runtime.run_array([token])[-1]
        return tokens, np.stack(top_ids), np.stack(top_logits)


def sample_top_p(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    scaled = (logits - logits.max()) / temperature
    probs = np.exp(scaled.astype(np.float64))
    probs /= probs.sum()
    order = np.argsort(-probs)
    cumulative = np.cumsum(probs[order])
    keep = order[: int(np.searchsorted(cumulative, top_p) + 1)]
    return int(rng.choice(keep, p=probs[keep] / probs[keep].sum()))


def done_ids(folder: Path) -> set[str]:
    index = folder / "index.jsonl"
    if not index.exists():
        return set()
    return {json.loads(line)["id"] for line in index.read_text().splitlines() if line.strip()}


def next_shard_number(folder: Path) -> int:
    numbers = [int(p.stem.split("-")[1]) for p in folder.glob("shard-*.npz")]
    return max(numbers, default=-1) + 1


def write_shard(folder: Path, number: int, answers: list[dict]) -> None:
    """answers: [{meta..., sequence, prompt_len, top_ids, top_logits}] -> shard file, then index lines."""
    sequences = np.concatenate([np.asarray(a["sequence"], np.int32) for a in answers])
    top_ids = np.concatenate([a["top_ids"] for a in answers])
    top_logits = np.concatenate([a["top_logits"] for a in answers])
    temporary = folder / f".shard-{number:05d}.npz"
    with open(temporary, "wb") as handle:
        np.savez(handle, sequences=sequences, top_ids=top_ids, top_logits=top_logits)
    os.replace(temporary, folder / f"shard-{number:05d}.npz")
    lines, sequence_start, answer_start = [], 0, 0
    for a in answers:
        n = len(a["sequence"])
        answer_len = n - a["prompt_len"]
        lines.append(json.dumps({"id": a["id"], "task": a["task"], "mode": a["mode"], "shard": number,
                                 "sequence": [sequence_start, sequence_start + n], "prompt_len": a["prompt_len"],
                                 "answer_rows": [answer_start, answer_start + answer_len]}))
        sequence_start += n
        answer_start += answer_len
    with open(folder / "index.jsonl", "a") as index:
        index.write("\n".join(lines) + "\n")


def generate(package: Path, folder: Path, prompts: Iterable[dict], encode: Callable[[str], list[int]], minutes: float,
             max_tokens: int = 128, seed: int = 0, sampled_every: int = 3, log=print) -> dict:
    """Answer prompts not yet in `folder` until `minutes` pass; every `sampled_every`-th answer is sampled."""
    folder.mkdir(parents=True, exist_ok=True)
    answerer = ChampionAnswerer(package)
    skip = done_ids(folder)
    shard = next_shard_number(folder)
    started = time.monotonic()
    pending: list[dict] = []
    answers = tokens = 0
    for position, item in enumerate(prompts):
        if time.monotonic() - started > minutes * 60:
            break
        if item["id"] in skip:
            continue
        mode = "sampled" if position % sampled_every == sampled_every - 1 else "greedy"
        prompt = encode(item["prompt"])
        rng = np.random.default_rng([seed, position])
        answer, top_ids, top_logits = answerer.answer(prompt, max_tokens, mode, rng)
        pending.append({**item, "mode": mode, "sequence": prompt + answer, "prompt_len": len(prompt),
                        "top_ids": top_ids, "top_logits": top_logits})
        answers += 1
        tokens += len(answer)
        if len(pending) == SHARD_ANSWERS:
            write_shard(folder, shard, pending)
            shard, pending = shard + 1, []
            elapsed = time.monotonic() - started
            log(f"[distill] {answers} answers, {tokens} answer tokens in {elapsed / 60:.1f} min ({tokens / elapsed:.1f} tok/s)")
    if pending:
        write_shard(folder, shard, pending)
    elapsed = time.monotonic() - started
    return {"answers": answers, "tokens": tokens, "seconds": elapsed, "total_answers": len(done_ids(folder))}
