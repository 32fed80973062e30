"""Would a draft that reads the champion's features generalise where the token-only draft does not? A
measurement for issue 22, not a shipped draft (the engine passes no features to drafts today).

The feature draft (EAGLE-style, linear): at context position j it reads the champion's final feature f_j
(after the final norm, float [576]: what the champion's head turns into the row for token j + 1) and the
embedding of token j + 1, and predicts token j + 2. In a round, the champion's features of every accepted
position come out of its verify pass and the bonus token is known, so the first draft token of a round is
exactly this prediction; later draft tokens would feed the draft's own predicted feature (not measured here).

    fc     [f_j ; E[x_{j+1}]] (1152) -> 576
    block  one Llama block at d 576 (9 heads of 64, 3 KV heads, SwiGLU d_ffn 768)
    head   RMSNorm, then the champion's head rows of the shipped draft's 12,288-token output vocabulary
Loss at answer positions: soft cross-entropy to the champion's row there (its features through its head,
renormalised over the 12,288 ids) plus smooth L1 from the block's output to the champion's next feature.

Steps (one command, CPU):
  1. champion features for the stored answers (answers.npz), for --feature-minutes;
  2. train the feature draft for --train-minutes;
  3. both drafts teacher-forced on the champion's greedy answers to the independent set (PyTorch champion,
     float32): greedy agreement at the same positions (answer tokens 2.., which a round's first draft token can
     reach), and the overlap sum min(p, q) at temperature 0.7 for both.

    .venv/bin/python scripts/feature_draft_probe.py [--feature-minutes 25] [--train-minutes 30] [--tokens 48]
        [--feature-cache DIR [--gather-only]] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.distill import prompt_encoder  # noqa: E402
from build_tools.distill_data import open_champion, read_token_archive  # noqa: E402
from build_tools.distill_model import Block, RMSNorm, cosine_lr, inverse_frequencies, rope_tables  # noqa: E402
from build_tools.distill_train import DraftShape, draft_vocabulary, macs_per_token, optimizer_step, prebuilt_model  # noqa: E402
from build_tools.eval_set import independent_items  # noqa: E402
from build_tools.recipes import DEFAULT_DRAFT, default_package  # noqa: E402
from pyodide_app.package_check import load_manifest  # noqa: E402
from scripts.draft_calibration import SAMPLED  # noqa: E402

BATCH = 16  # sequences per champion call while gathering features


BLOCK = DraftShape(d_model=576, n_layers=1, n_heads=9, n_kv_heads=3, d_ffn=768)  # the feature draft's one block


class FeatureDraft(nn.Module):
    def __init__(self, embedding: torch.Tensor, head_rows: torch.Tensor, norm: torch.Tensor, theta: float, eps: float):
        super().__init__()
        shape = BLOCK
        d = shape.d_model
        self.embed = nn.Embedding.from_pretrained(embedding, freeze=True)  # the champion's [V, 576]
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.block = Block(shape, eps)
        self.norm = RMSNorm(d, eps)
        self.head = nn.Linear(d, len(head_rows), bias=False)
        with torch.no_grad():
            self.head.weight.copy_(head_rows)
            self.norm.weight.copy_(norm)
        self.register_buffer("inv_freq", inverse_frequencies(theta, d // shape.n_heads), persistent=False)

    def forward(self, features, next_ids):  # features [B, T, 576], next_ids [B, T] -> predicted features [B, T, 576]
        cos, sin = rope_tables(torch.arange(features.shape[1]), self.inv_freq)
        x = self.fc(torch.cat([features, self.embed(next_ids)], dim=-1))
        return self.block(x, cos, sin)

    def logits(self, predicted):  # [..., 576] -> [..., V']
        return self.head(self.norm(predicted))


def feature_draft_macs(vocab: int) -> int:
    """The fc layer's 2d x d, then the block and head as distill_train counts a draft's."""
    d = BLOCK.d_model
    config = {"d_model": d, "n_kv_heads": BLOCK.n_kv_heads, "head_dim": d // BLOCK.n_heads, "d_ffn": BLOCK.d_ffn}
    return 2 * d * d + macs_per_token({**config, "n_layers": 1}, vocab)


# -- the champion ---------------------------------------------------------------------------------


def feature_champion(package: Path, slots: int, capacity: int):
    """The batched champion with its head swapped for the identity, so feed() returns final features [.., 576];
    -> (champion, its real head [V, 576], EOS ids)."""
    champion, eos = open_champion(package, slots, capacity)
    head = champion.head
    champion.head = torch.eye(champion.config.d_model)
    return champion, head, eos


def sequence_features(champion, sequences: list[np.ndarray]) -> list[np.ndarray]:
    """float16 [len, 576] final features at every position of each sequence (padded together, causal)."""
    width = max(len(s) for s in sequences)
    ids = torch.zeros(len(sequences), width, dtype=torch.long)
    for row, s in enumerate(sequences):
        ids[row, : len(s)] = torch.from_numpy(s)
    for slot in range(len(sequences)):
        champion.clear(slot)
    out = champion.feed(list(range(len(sequences))), ids, first_row=0)
    return [out[row, : len(s)].numpy().astype(np.float16) for row, s in enumerate(sequences)]


def gather(
    package: Path, archive: Path, minutes: float, seed: int, cache: Path | None = None
) -> list[tuple[np.ndarray, int, np.ndarray]]:
    """[(sequence, prompt length, features)] for stored answers in a seeded random order, until time is up
    (checked between pools, so a run may go over by one pool's time). cache: a folder of finished pools
    (pool-START.npz, 16 * BATCH answers each); pools found there are read, not computed, and each new pool is
    written there, so gathering resumes across runs."""
    stored = read_token_archive(archive)
    order = np.random.default_rng(seed).permutation(len(stored))
    champion = None
    done, started = [], time.monotonic()
    for start in range(0, len(order), 16 * BATCH):
        pool = sorted(order[start : start + 16 * BATCH], key=lambda i: len(stored[i][1]))
        kept = cache / f"pool-{start:06d}.npz" if cache is not None else None
        if kept is not None and kept.exists():
            done += read_pool(kept, stored)
            continue
        if time.monotonic() - started >= minutes * 60:
            break
        if champion is None:
            champion, _, _ = feature_champion(package, BATCH, max(len(s) for _, s, _ in stored))
        fresh = []
        for cut in range(0, len(pool), BATCH):
            chunk = [stored[i] for i in pool[cut : cut + BATCH]]
            features = sequence_features(champion, [s for _, s, _ in chunk])
            fresh += [(s, p, f) for (_, s, p), f in zip(chunk, features)]
        if kept is not None:
            write_pool(kept, pool, [f for _, _, f in fresh])
        done += fresh
        print(f"[probe] features for {len(done)} answers ({(time.monotonic() - started) / 60:.1f} min)", flush=True)
    return done


def write_pool(path: Path, indices, features: list[np.ndarray]) -> None:
    """One pool's features: float16 [sum of lengths, 576], the stored answers' indices and lengths."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npz")
    lengths = [len(f) for f in features]
    np.savez(partial, indices=np.asarray(indices), lengths=lengths, features=np.concatenate(features))
    partial.rename(path)


def read_pool(path: Path, stored) -> list[tuple[np.ndarray, int, np.ndarray]]:
    with np.load(path) as pool:
        ends = np.cumsum(pool["lengths"])
        features = np.split(pool["features"], ends[:-1])
        return [(stored[i][1], stored[i][2], f) for i, f in zip(pool["indices"], features)]


# -- training -------------------------------------------------------------------------------------


def batch_tensors(batch, head_v: torch.Tensor):
    """-> (features [B, W, 576], next ids [B, W], rows/cols of the answer positions j that predict an answer
    token x_{j+2} (j >= prompt_len - 1), the champion's rows there over V' [N, V'], its next features [N, 576])."""
    width = max(len(s) for s, _, _ in batch) - 1
    feats = torch.zeros(len(batch), width, 576)
    nxt = torch.zeros(len(batch), width, dtype=torch.long)
    rows, cols = [], []
    for r, (s, p, f) in enumerate(batch):
        n = len(s) - 1
        feats[r, :n] = torch.from_numpy(f[:n].astype(np.float32))
        nxt[r, :n] = torch.from_numpy(s[1:])
        j = torch.arange(p - 1, len(s) - 2)
        rows.append(torch.full_like(j, r))
        cols.append(j)
    rows, cols = torch.cat(rows), torch.cat(cols)
    target_features = feats[rows, cols + 1]
    target_logits = target_features @ head_v.T
    return feats, nxt, rows, cols, target_logits, target_features


def train(model, data, head_v, minutes: float, seed: int, tokens_per_batch: int = 4096, lr: float = 1e-3) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    started, steps, epoch, last = time.monotonic(), 0, 0, math.nan
    by_length = sorted(range(len(data)), key=lambda i: len(data[i][0]))
    while time.monotonic() - started < minutes * 60:
        cuts, batch = [], []
        for i in by_length:
            if batch and len(data[i][0]) * (len(batch) + 1) > tokens_per_batch:
                cuts.append(batch)
                batch = []
            batch.append(i)
        cuts.append(batch)
        for index in rng.permutation(len(cuts)):
            elapsed = time.monotonic() - started
            if elapsed >= minutes * 60:
                break
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(lr, elapsed, minutes * 60)
            feats, nxt, rows, cols, target_logits, target_features = batch_tensors(
                [data[i] for i in cuts[index]], head_v
            )
            predicted = model(feats, nxt)[rows, cols]
            p = torch.softmax(target_logits, -1)
            soft = -(p * torch.log_softmax(model.logits(predicted), -1)).sum(-1).mean()
            steps, last = (
                steps + 1,
                optimizer_step(optimizer, params, soft + F.smooth_l1_loss(predicted, target_features)),
            )
            if steps % 50 == 0:
                print(f"[probe] step {steps} epoch {epoch} loss {last:.3f} ({elapsed / 60:.1f} min)", flush=True)
        epoch += 1
    return {"steps": steps, "epochs": epoch, "final_loss": last, "seconds": time.monotonic() - started}


# -- evaluation -----------------------------------------------------------------------------------


def greedy_answers(champion, head, eos, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """The PyTorch champion's greedy answers (float32), one slot per prompt."""
    answers = []
    for slot, ids in enumerate(prompts):
        champion.clear(slot)
        row = champion.feed([slot], torch.tensor([ids]))[0] @ head.T
        answer = [int(row.argmax())]
        while answer[-1] not in eos and len(answer) < tokens:
            row = champion.feed([slot], torch.tensor([[answer[-1]]]))[0] @ head.T
            answer.append(int(row.argmax()))
        answers.append(answer)
    return answers


def overlap(p_logits: torch.Tensor, q_logits: torch.Tensor, vocab: np.ndarray) -> torch.Tensor:
    """sum_x min(p, q) per row: p the champion at SAMPLED's temperature and top-p [N, V]; q the draft at that
    temperature over V'."""
    p = torch.softmax(p_logits.double() / SAMPLED.temperature, -1)
    sorted_p, order = p.sort(-1, descending=True)
    keep = (sorted_p.cumsum(-1) - sorted_p) < SAMPLED.top_p
    p = torch.zeros_like(p).scatter(-1, order, sorted_p * keep)
    p = p / p.sum(-1, keepdim=True)
    q = torch.softmax(q_logits.double() / SAMPLED.temperature, -1)
    return torch.minimum(p[:, torch.from_numpy(vocab)], q).sum(-1)


def evaluate(model, token_draft, champion, head, eos, encode, vocab, tokens: int) -> dict:
    items = independent_items()
    prompts = [encode(item["messages"]) for item in items]
    answers = greedy_answers(champion, head, eos, prompts, tokens)
    tally = {"feature": [], "token": [], "feature_overlap": [], "token_overlap": []}
    by_kind: dict[str, list] = {}
    with torch.no_grad():
        for item, ids, answer in zip(items, prompts, answers):
            s = np.asarray(ids + answer, np.int64)
            p = len(ids)
            if len(answer) < 2:
                continue
            f = torch.from_numpy(sequence_features(champion, [s])[0].astype(np.float32))
            j = torch.arange(p - 1, len(s) - 2)  # predicts answer tokens 2.. (s[j + 2])
            predicted = model(f[None, :-1], torch.from_numpy(s[1:])[None])[0, j]
            feature_logits = model.logits(predicted)
            token_logits = token_draft(torch.from_numpy(s)[None])[0, j + 1]
            truth = s[j.numpy() + 2]
            champion_rows = f[j + 1] @ head.T
            hits_f = vocab[feature_logits.argmax(-1).numpy()] == truth
            hits_t = vocab[token_logits.argmax(-1).numpy()] == truth
            tally["feature"] += hits_f.tolist()
            tally["token"] += hits_t.tolist()
            tally["feature_overlap"] += overlap(champion_rows, feature_logits, vocab).tolist()
            tally["token_overlap"] += overlap(champion_rows, token_logits, vocab).tolist()
            by_kind.setdefault(item["kind"], []).append((hits_f, hits_t))
    kinds = {
        kind: {
            "tokens": int(sum(len(a) for a, _ in pairs)),
            "feature": float(np.mean(np.concatenate([a for a, _ in pairs]))),
            "token": float(np.mean(np.concatenate([b for _, b in pairs]))),
        }
        for kind, pairs in sorted(by_kind.items())
    }
    return {
        "positions": len(tally["feature"]),
        **{name: float(np.mean(values)) for name, values in tally.items()},
        "per_kind": kinds,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--feature-minutes", type=float, default=25)
    parser.add_argument("--train-minutes", type=float, default=30)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feature-cache", type=Path, help="a folder that keeps gathered features between runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--gather-only", action="store_true", help="stop after gathering (with --feature-cache)")
    parser.add_argument("--out", type=Path, default=Path("build/feature-draft-probe.json"))
    args = parser.parse_args()
    if args.gather_only and args.feature_cache is None:
        parser.error("--gather-only keeps nothing without --feature-cache")
    torch.set_num_threads(args.threads)
    package = default_package()
    manifest = load_manifest(package)
    vocab = draft_vocabulary(DEFAULT_DRAFT / "draft.onnx")

    data = gather(package, DEFAULT_DRAFT / "answers.npz", args.feature_minutes, args.seed, args.feature_cache)
    gathered = {"answers": len(data), "answer_tokens": sum(len(s) - p for s, p, _ in data)}
    print(f"[probe] {gathered}", flush=True)
    if args.gather_only:
        return
    champion, head, eos = feature_champion(package, 48, 2048)
    c = champion.config
    model = FeatureDraft(
        champion.embed, head[torch.from_numpy(vocab)].clone(), champion.final_norm, c.rope_theta, c.rms_eps
    )
    training = train(model, data, head[torch.from_numpy(vocab)], args.train_minutes, args.seed)
    del data

    token_draft, _ = prebuilt_model(DEFAULT_DRAFT, c.vocab_size, c.rms_eps)
    model.eval()
    result = evaluate(model, token_draft, champion, head, eos, prompt_encoder(package, manifest), vocab, args.tokens)
    result.update(
        training=training,
        data=gathered,
        macs_per_token={
            "feature_draft": feature_draft_macs(len(vocab)),
            "champion": macs_per_token(manifest["champion"]["config"], c.vocab_size),
        },
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
