"""Champion answers for distillation: resumable, incremental, out of git.

The champion runs as its float32 forward in PyTorch (distill_champion.BatchedChampion, checked against
champion.onnx by the tests) over SLOTS sequences at once: continuous batching — a finished answer's
slot takes the next prompt at once. Per answer position we keep the token and the champion's top-K
logits (the distillation target).

An answers folder can be kept as token ids alone (`export_tokens`: prompts and answers, ~2 bytes per token,
small enough for git) and rebuilt on another machine by `replay`, which teacher-forces the champion over
each stored sequence to recompute the top-K targets (no sampling: the answers are the stored ones).

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
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

TOP_K = 32
SHARD_ANSWERS = 16
SLOTS = (
    64  # sequences decoded together (147 answer tokens/s sustained for SmolLM2-135M on 2 cores, vs 5 for champion.onnx)
)
CAPACITY = 1024  # KV rows per slot: prompt + answer
MODES = {"greedy": (0.0, 1.0), "sampled": (0.8, 0.95)}  # temperature, top-p


@dataclass
class Job:
    """One prompt being answered: the tokens chosen so far and the champion's top-K at each."""

    item: dict
    mode: str
    prompt: list[int]
    rng: np.random.Generator
    answer: list[int] = field(default_factory=list)
    top_ids: list[np.ndarray] = field(default_factory=list)  # int32 [K] per answer position
    top_logits: list[np.ndarray] = field(default_factory=list)  # float16 [K]

    def take(self, logits, eos: set[int], max_tokens: int) -> bool:
        """Record the champion's logits float32 [V] (torch) for the next position, choose its token; True when done."""
        import torch

        values, ids = torch.topk(logits, TOP_K)
        self.top_ids.append(ids.numpy().astype(np.int32))
        self.top_logits.append(values.numpy().astype(np.float16))
        temperature, top_p = MODES[self.mode]
        token = int(ids[0]) if temperature == 0 else sample_top_p(logits.numpy(), temperature, top_p, self.rng)
        self.answer.append(token)
        return token in eos or len(self.answer) >= max_tokens

    def record(self) -> dict:
        return {
            **self.item,
            "mode": self.mode,
            "sequence": self.prompt + self.answer,
            "prompt_len": len(self.prompt),
            "top_ids": np.stack(self.top_ids),
            "top_logits": np.stack(self.top_logits),
        }


def open_champion(package: Path, slots: int, capacity: int):
    """-> (BatchedChampion over the package's champion weights, EOS ids)."""
    import torch

    from pyodide_app.package_check import load_manifest

    from .distill_champion import BatchedChampion
    from .reference import read_champion

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    manifest = load_manifest(package)
    config, tensors = read_champion(package, manifest)
    return BatchedChampion(config, tensors, slots, capacity), set(manifest["generation"]["eos_ids"])


def sample_top_p(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """A token from the smallest most-probable set of softmax(logits / temperature) holding top_p of its mass.
    Only entries of at least (1 - top_p) / V are sorted (a 49,152-entry sort took 2.3 ms a row): the others hold
    less than 1 - top_p in all, so the set is found among them with the cumulative sums a full sort gives."""
    scaled = (logits - logits.max()) / temperature
    probs = np.exp(scaled.astype(np.float64))
    probs /= probs.sum()
    candidates = np.flatnonzero(probs >= (1 - top_p) / len(probs))
    order = candidates[np.argsort(-probs[candidates], kind="stable")]
    if np.cumsum(probs[order])[-1] < top_p:  # rounding left the set short: sort everything
        order = np.argsort(-probs, kind="stable")
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
        lines.append(
            json.dumps(
                {
                    "id": a["id"],
                    "task": a["task"],
                    "mode": a["mode"],
                    "shard": number,
                    "sequence": [sequence_start, sequence_start + n],
                    "prompt_len": a["prompt_len"],
                    "answer_rows": [answer_start, answer_start + answer_len],
                }
            )
        )
        sequence_start += n
        answer_start += answer_len
    with open(folder / "index.jsonl", "a") as index:
        index.write("\n".join(lines) + "\n")


def messages_of(item: dict) -> list[dict]:
    """A prompt item's chat: its `messages` (multi-turn, system prompts) or its one user `prompt`."""
    return item.get("messages") or [{"role": "user", "content": item["prompt"]}]


def pending_jobs(
    prompts: Iterable[dict], skip: set[str], encode: Callable[[list[dict]], list[int]], seed: int, sampled_every: int
) -> Iterator[Job]:
    """Jobs for the prompts not yet answered; one prompt in `sampled_every` (by a hash of its id, so an
    interleaved stream's sources get both modes; 0: none) is answered sampled, the others greedy. (Chosen by
    stream position, the mixed stream's period of 3 made every template answer sampled and every found one
    greedy.)"""
    for position, item in enumerate(prompts):
        if item["id"] not in skip:
            sampled = sampled_every and zlib.crc32(item["id"].encode()) % sampled_every == 0
            mode = "sampled" if sampled else "greedy"
            yield Job(item, mode, encode(messages_of(item)), np.random.default_rng([seed, position]))


def generate(
    package: Path,
    folder: Path,
    prompts: Iterable[dict],
    encode: Callable[[list[dict]], list[int]],
    minutes: float,
    max_tokens: int = 128,
    seed: int = 0,
    sampled_every: int = 3,
    slots: int = SLOTS,
    skip: frozenset[str] = frozenset(),
    log=print,
) -> dict:
    """Answer prompts not yet in `folder` nor in `skip` (ids answered elsewhere, e.g. in a replay archive), taking
    new ones until `minutes` pass (answers under way finish)."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    champion, eos = open_champion(package, slots, CAPACITY)
    jobs = pending_jobs(prompts, done_ids(folder) | skip, encode, seed, sampled_every)
    shard, started = next_shard_number(folder), time.monotonic()
    active: dict[int, Job] = {}  # slot -> job
    done: list[dict] = []
    answers = tokens = 0

    def finish(job: Job) -> None:
        nonlocal shard, answers, tokens
        done.append(job.record())
        answers, tokens = answers + 1, tokens + len(job.answer)
        if len(done) == SHARD_ANSWERS:
            write_shard(folder, shard, done)
            shard, done[:] = shard + 1, []
            elapsed = time.monotonic() - started
            log(
                f"[distill] {answers} answers, {tokens} answer tokens in {elapsed / 60:.1f} min "
                f"({tokens / elapsed:.1f} tok/s)"
            )

    while True:
        while len(active) < slots and time.monotonic() - started < minutes * 60:
            job = next(jobs, None)
            if job is None:
                break
            if len(job.prompt) + max_tokens > CAPACITY:
                log(
                    f"[distill] skipped {job.item['id']}: {len(job.prompt)} prompt tokens do not fit {CAPACITY} KV rows"
                )
                continue
            slot = min(set(range(slots)) - set(active))
            champion.clear(slot)
            if job.take(champion.feed([slot], torch.tensor([job.prompt]))[0], eos, max_tokens):
                finish(job)
            else:
                active[slot] = job
        if not active:
            break
        order = sorted(active)
        logits = champion.feed(order, torch.tensor([[active[s].answer[-1]] for s in order]))
        for slot, row in zip(order, logits):
            if active[slot].take(row, eos, max_tokens):
                finish(active.pop(slot))
    if done:
        write_shard(folder, shard, done)
    elapsed = time.monotonic() - started
    return {"answers": answers, "tokens": tokens, "seconds": elapsed, "total_answers": len(done_ids(folder))}


def export_tokens(folder: Path, archive: Path) -> int:
    """The answers in `folder` as token ids only -> archive (npz: tokens uint16 [all sequences], lengths and
    prompt_lens int32 [answers], meta: JSON lines {id, task, mode}); returns the number of answers."""
    from .distill_train import load_answers

    answers = load_answers(folder)
    meta = "\n".join(json.dumps({"id": a.id, "task": a.task, "mode": a.mode}) for a in answers)
    np.savez_compressed(
        archive,
        tokens=np.concatenate([a.sequence for a in answers]).astype(np.uint16),
        lengths=np.asarray([len(a.sequence) for a in answers], np.int32),
        prompt_lens=np.asarray([a.prompt_len for a in answers], np.int32),
        meta=np.frombuffer(meta.encode(), np.uint8),
    )
    return len(answers)


def read_token_archive(archive: Path) -> list[tuple[dict, np.ndarray, int]]:
    """An export_tokens archive -> [(meta {id, task, mode}, sequence int64 [prompt + answer], prompt length)]."""
    with np.load(archive) as data:
        tokens, lengths, prompt_lens = data["tokens"].astype(np.int64), data["lengths"], data["prompt_lens"]
        meta = [json.loads(line) for line in bytes(data["meta"]).decode().splitlines()]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return [(m, tokens[s : s + n], int(p)) for m, s, n, p in zip(meta, starts, lengths, prompt_lens)]


def replay(package: Path, archive: Path, folder: Path, minutes: float | None = None, log=print) -> dict:
    """Rebuild an answers folder from an export_tokens archive: for each stored answer not yet in `folder`,
    one teacher-forced champion call over prompt + answer gives the top-K logits at every answer position.
    `minutes`: stop after this long (None: the whole archive; ~3 answers/s for SmolLM2-135M on 2 cores, so the
    shipped draft's 12,765 take about 70 min); a later call resumes after the answers done."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    stored = read_token_archive(archive)
    champion, _ = open_champion(package, 1, max((len(sequence) for _, sequence, _ in stored), default=1))
    skip, shard, done, started = done_ids(folder), next_shard_number(folder), [], time.monotonic()
    for item, sequence, prompt_len in stored:
        if item["id"] in skip:
            continue
        if minutes is not None and time.monotonic() - started >= minutes * 60:
            break
        champion.clear(0)
        logits = champion.feed([0], torch.from_numpy(sequence)[None], first_row=prompt_len - 1)[0, :-1]
        values, ids = torch.topk(logits, TOP_K)  # [answer_len, K]: the rows that chose each answer token
        done.append(
            {
                **item,
                "sequence": sequence.tolist(),
                "prompt_len": prompt_len,
                "top_ids": ids.numpy().astype(np.int32),
                "top_logits": values.numpy().astype(np.float16),
            }
        )
        if len(done) == SHARD_ANSWERS:
            write_shard(folder, shard, done)
            shard, done = shard + 1, []
    if done:
        write_shard(folder, shard, done)
    elapsed = time.monotonic() - started
    log(f"[distill] replayed {archive.name} into {folder} in {elapsed / 60:.1f} min")
    return {"answers": len(done_ids(folder)), "seconds": elapsed}
