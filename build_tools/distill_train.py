"""Train a tiny Llama draft on the champion's answers (PyTorch, CPU), and turn it into a ModelSource
the project's ONNX exporter writes like any other draft.

Architecture (exportable by export_onnx.py: GGUF conventions, adjacent-pair RoPE):
  embedding  champion token embeddings projected onto their top-d principal directions (frozen)
  layers     n Llama blocks of width d (RMSNorm, GQA attention with RoPE, SwiGLU)
  head       over a reduced output vocabulary (the most frequent tokens of the champion's answers),
             initialised from the projected embedding rows of those tokens
Loss on answer positions: cross-entropy to the champion's token (positions whose token is outside the
reduced vocabulary are skipped) + cross-entropy to the champion's top-K softmax (renormalised over the
ids the draft can emit).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class DraftShape:
    d_model: int = 256
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    d_ffn: int = 768
    output_vocab: int = 8192


# -- data -----------------------------------------------------------------------------------------


@dataclass
class Answer:
    id: str
    task: str
    mode: str
    sequence: np.ndarray  # int64 [n]: prompt + answer
    prompt_len: int
    top_ids: np.ndarray  # int32 [answer_len, K]
    top_logits: np.ndarray  # float32 [answer_len, K]


def load_answers(folder: Path) -> list[Answer]:
    shards: dict[int, dict] = {}
    answers = []
    for line in (folder / "index.jsonl").read_text().splitlines():
        meta = json.loads(line)
        shard = shards.get(meta["shard"])
        if shard is None:
            with np.load(folder / f"shard-{meta['shard']:05d}.npz") as data:
                shard = shards[meta["shard"]] = {k: data[k] for k in data.files}
        a, b = meta["sequence"]
        r0, r1 = meta["answer_rows"]
        answers.append(
            Answer(
                meta["id"],
                meta["task"],
                meta["mode"],
                shard["sequences"][a:b].astype(np.int64),
                meta["prompt_len"],
                shard["top_ids"][r0:r1],
                shard["top_logits"][r0:r1].astype(np.float32),
            )
        )
    return answers


def choose_vocabulary(answers: list[Answer], size: int, always: list[int]) -> tuple[np.ndarray, float]:
    """The `size` most frequent answer tokens (plus `always`, e.g. EOS), sorted; and their coverage."""
    counts = Counter(int(t) for a in answers for t in a.sequence[a.prompt_len :])
    chosen = set(always)
    for token, _ in counts.most_common():
        if len(chosen) >= size:
            break
        chosen.add(token)
    vocab = np.asarray(sorted(chosen), np.int64)
    return vocab, coverage(answers, vocab)


def coverage(answers: list[Answer], vocab: np.ndarray) -> float:
    """Share of the answers' tokens that the output vocabulary can emit."""
    tokens = np.concatenate([a.sequence[a.prompt_len :] for a in answers]) if answers else np.zeros(0, np.int64)
    return float(np.isin(tokens, vocab).mean()) if len(tokens) else 0.0


# -- the model ------------------------------------------------------------------------------------


def build_model(shape: DraftShape, embedding: np.ndarray, head_init: np.ndarray, rope_theta: float, rms_eps: float):
    """The draft to train (distill_model.Draft; imported here so this module loads without torch)."""
    from .distill_model import Draft

    return Draft(shape, embedding, head_init, rope_theta, rms_eps)


BLOCK_TENSORS = {  # distill_model.Block attribute -> the GGUF tensor name of that projection
    "q": "attn_q",
    "k": "attn_k",
    "v": "attn_v",
    "o": "attn_output",
    "gate": "ffn_gate",
    "up": "ffn_up",
    "down": "ffn_down",
}


def from_champion_blocks(source, layers: list[int], vocab: np.ndarray):
    """A draft that starts as a shortened champion (a ModelSource): its embedding (frozen), its blocks `layers` in
    that order, its final norm, and its head rows for `vocab`. Fine-tuning then makes the few blocks stand in for
    all of them, starting from pretrained weights rather than random ones. -> (distill_model.Draft, its shape)."""
    import torch

    from .reference import dequantize

    config = source.config
    if not layers or any(not 0 <= i < config.n_layers for i in layers):
        raise ValueError(f"champion layers {layers}: each must be in 0..{config.n_layers - 1}")
    shape = DraftShape(config.d_model, len(layers), config.n_heads, config.n_kv_heads, config.d_ffn, len(vocab))
    embedding = dequantize(source.tensors["token_embd.weight"])  # [V, D]
    head = embedding if config.tied_embeddings else dequantize(source.tensors["output.weight"])
    model = build_model(shape, embedding, head[vocab], config.rope_theta, config.rms_eps)
    # only the blocks kept are dequantized ([out, in] projections)
    tensor = lambda name: torch.from_numpy(np.ascontiguousarray(dequantize(source.tensors[name]), np.float32))  # noqa: E731
    with torch.no_grad():
        for block, i in zip(model.blocks, layers):
            for part, name in BLOCK_TENSORS.items():
                getattr(block, part).weight.copy_(tensor(f"blk.{i}.{name}.weight"))
            block.attn_norm.weight.copy_(tensor(f"blk.{i}.attn_norm.weight"))
            block.ffn_norm.weight.copy_(tensor(f"blk.{i}.ffn_norm.weight"))
        model.norm.weight.copy_(tensor("output_norm.weight"))
    return model, shape


def projected_embedding(champion_embedding: np.ndarray, d_model: int) -> np.ndarray:
    """E [V, D] -> E @ P [V, d]: P = the top-d right singular directions of E (variance kept per row norm)."""
    gram = champion_embedding.T.astype(np.float64) @ champion_embedding.astype(np.float64)
    values, vectors = np.linalg.eigh(gram)
    projection = vectors[:, np.argsort(values)[::-1][:d_model]]
    return (champion_embedding @ projection).astype(np.float32)


def q8_codes_to_float(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """An exported Q8_0 table (codes uint8 [N, nb, 32] holding q + 128, scales [N*nb]) -> float32 [N, nb*32]."""
    n, nb, block = codes.shape
    values = (codes.astype(np.float32) - 128) * scales.reshape(n, nb, 1)
    return values.reshape(n, nb * block)


def draft_vocabulary(draft_onnx: Path) -> np.ndarray:
    """A prebuilt draft's output vocabulary (its id_map), int64 [V'] sorted."""
    import onnx
    from onnx import numpy_helper

    found = [i for i in onnx.load(str(draft_onnx)).graph.initializer if i.name.startswith("id_map")]
    return numpy_helper.to_array(found[0]).astype(np.int64)


def warm_start(model, draft_onnx: Path, vocab: np.ndarray) -> int:
    """Load a prebuilt draft's exported weights (its draft.onnx) into `model`, whose head is over `vocab` (a
    superset of the draft's id_map): the draft's head rows go to their tokens, other rows keep their initial
    values. Continuing from the shipped draft keeps what it learnt from data earlier sessions generated (not
    kept: outside git). A model with more layers than the draft grows it: the draft's layers come first and
    each further block starts as the identity (its attention output and down projections zero, so the grown
    model computes what the draft did and training uses the new depth). Returns the draft's layer count."""
    import onnx
    import torch
    from onnx import numpy_helper

    graph = onnx.load(str(draft_onnx)).graph
    weights = {i.name.rsplit("_", 1)[0]: np.array(numpy_helper.to_array(i)) for i in graph.initializer}
    norms = [np.array(numpy_helper.to_array(i)) for i in graph.initializer if i.name.startswith("norm_")]  # in order
    layers = (len(norms) - 1) // 2  # attention and FFN norm per layer, then the output norm
    if layers > len(model.blocks):
        raise ValueError(f"the warm-start draft has {layers} layers, more than the {len(model.blocks)} to train")

    def table(prefix: str) -> torch.Tensor:
        return torch.from_numpy(q8_codes_to_float(weights[prefix + "_q"], weights[prefix + "_s"]))

    rows = np.searchsorted(vocab, weights["id_map"].astype(np.int64))
    if not np.array_equal(vocab[np.minimum(rows, len(vocab) - 1)], weights["id_map"]):
        raise ValueError("the output vocabulary does not contain the warm-start draft's")
    with torch.no_grad():
        model.embed.weight.copy_(table("embd"))
        for i, block in enumerate(model.blocks[:layers]):
            for part in ("q", "k", "v", "o", "gate", "up", "down"):
                getattr(block, part).weight.copy_(table(f"l{i}_{part}"))
            block.attn_norm.weight.copy_(torch.from_numpy(norms[2 * i]))
            block.ffn_norm.weight.copy_(torch.from_numpy(norms[2 * i + 1]))
        for block in model.blocks[layers:]:  # grown: identity residual blocks
            block.o.weight.zero_()
            block.down.weight.zero_()
        model.norm.weight.copy_(torch.from_numpy(norms[-1]))
        model.head.weight[torch.from_numpy(rows)] = table("head")
    return layers


def prebuilt_model(folder: Path, vocab_size: int, rms_eps: float):
    """A prebuilt draft folder (draft.json, draft.onnx) as a distill_model.Draft holding its exported weights,
    in eval mode -> (model, its output vocabulary int64 [V'])."""
    config = json.loads((folder / "draft.json").read_text())["config"]
    vocab = draft_vocabulary(folder / "draft.onnx")
    shape = DraftShape(
        **{k: config[k] for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ffn")}, output_vocab=len(vocab)
    )
    zeros = lambda rows: np.zeros((rows, shape.d_model), np.float32)  # noqa: E731  (warm_start overwrites them)
    model = build_model(shape, zeros(vocab_size), zeros(len(vocab)), config["rope_theta"], rms_eps)
    warm_start(model, folder / "draft.onnx", vocab)
    return model.eval(), vocab


# -- training -------------------------------------------------------------------------------------


def batches(answers: list[Answer], tokens_per_batch: int, rng: np.random.Generator, pool: int = 64):
    """Batches of about tokens_per_batch padded tokens (width = the longest sequence), in random order. Each
    pool of `pool` batches' worth of randomly drawn answers is sorted by length before it is cut, so a batch
    holds sequences of similar length (random ones padded 42% of their positions: 2,141k tokens in 12,765
    answers of 84-716)."""
    order = rng.permutation(len(answers))
    size = lambda i: len(answers[i].sequence)  # noqa: E731
    cut: list[list[Answer]] = []
    start = 0
    while start < len(order):
        taken, total = [], 0
        while start < len(order) and total < pool * tokens_per_batch:
            taken.append(order[start])
            total, start = total + size(order[start]), start + 1
        batch: list[int] = []
        for i in sorted(taken, key=size):
            if batch and size(i) * (len(batch) + 1) > tokens_per_batch:
                cut.append([answers[j] for j in batch])
                batch = []
            batch.append(i)
        if batch:
            cut.append([answers[j] for j in batch])
    for index in rng.permutation(len(cut)):
        yield cut[index]


def batch_loss(model, batch: list[Answer], vocab: np.ndarray, distill_weight: float):
    """Mean over the batch's answer positions of the hard cross-entropy to the champion's token plus
    distill_weight times the soft one to its top-K softmax. The head runs on answer positions only (a
    12,288-way head costs as much per position as four blocks, and in the shipped data 56% of a sequence's
    positions are its prompt's)."""
    import torch

    index_of = np.full(int(max(vocab.max(), max(int(a.sequence.max()) for a in batch)) + 1), -1, np.int64)
    index_of[vocab] = np.arange(len(vocab))
    width = max(len(a.sequence) for a in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    for row, a in enumerate(batch):
        ids[row, : len(a.sequence)] = torch.from_numpy(a.sequence)
    features = model.features(ids)  # [B, W, D]
    rows = torch.cat([torch.full((len(a.sequence) - a.prompt_len,), r) for r, a in enumerate(batch)])
    positions = torch.cat([torch.arange(a.prompt_len - 1, len(a.sequence) - 1) for a in batch])  # each predicts
    log_q = torch.log_softmax(model.head(features[rows, positions]), dim=-1)  # [N, V'], N answer positions
    answer = np.concatenate([a.sequence[a.prompt_len :] for a in batch])
    targets = torch.from_numpy(index_of[np.clip(answer, 0, len(index_of) - 1)])
    known = targets >= 0  # the champion's token is one the draft can emit
    hard = -log_q[known].gather(1, targets[known, None]).sum()
    top_ids = np.concatenate([a.top_ids for a in batch])  # [N, K]
    top = torch.from_numpy(index_of[np.clip(top_ids, 0, len(index_of) - 1)])  # reduced index or -1
    p = torch.softmax(torch.from_numpy(np.concatenate([a.top_logits for a in batch])), dim=-1) * (top >= 0)
    p = p / p.sum(-1, keepdim=True).clamp_min(1e-9)
    soft = -(p * log_q.gather(1, top.clamp_min(0))).sum()
    return (hard + distill_weight * soft) / max(len(positions), 1)


def optimizer_step(optimizer, params, loss) -> float:
    """Backpropagate loss, clip the gradients of params to norm 1, step; -> the loss as a float."""
    import torch

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    return float(loss.detach())


def train(
    model,
    answers: list[Answer],
    vocab: np.ndarray,
    minutes: float,
    seed: int,
    lr: float = 2e-3,
    tokens_per_batch: int = 2048,
    distill_weight: float = 1.0,
    log=print,
) -> dict:
    import torch

    from .distill_model import cosine_lr

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    started, steps, epoch, last = time.monotonic(), 0, 0, math.nan
    budget = minutes * 60
    while time.monotonic() - started < budget:
        for batch in batches(answers, tokens_per_batch, rng):
            elapsed = time.monotonic() - started
            if elapsed >= budget:
                break
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(lr, elapsed, budget)
            steps, last = steps + 1, optimizer_step(optimizer, params, batch_loss(model, batch, vocab, distill_weight))
            if steps % 50 == 0:
                log(f"[distill] step {steps} epoch {epoch} loss {last:.3f} ({elapsed / 60:.1f} min)")
        epoch += 1
    return {"steps": steps, "epochs": epoch, "final_loss": last, "seconds": time.monotonic() - started}


def agreement(model, answers: list[Answer], vocab: np.ndarray, ks=(2, 4, 8)) -> dict:
    """Teacher-forced top-1 agreement with the champion's greedy answers, overall and per task, and the
    expected tokens per champion call of greedy speculative decoding at each k (see tokens_per_call)."""
    import torch

    hits: Counter = Counter()
    totals: Counter = Counter()
    runs = []
    with torch.no_grad():
        for a in answers:
            logits = model(torch.from_numpy(a.sequence)[None])[0, a.prompt_len - 1 : len(a.sequence) - 1]
            same = vocab[logits.argmax(-1).numpy()] == a.sequence[a.prompt_len :]
            hits[a.task] += int(same.sum())
            totals[a.task] += len(same)
            runs.append(same)
    per_task = {task: hits[task] / totals[task] for task in sorted(totals)}
    overall = sum(hits.values()) / max(sum(totals.values()), 1)
    per_call = {str(k): tokens_per_call(runs, k) for k in ks}
    return {"overall": overall, "per_task": per_task, "tokens": sum(totals.values()), "tokens_per_call": per_call}


def tokens_per_call(hits: list[np.ndarray], k: int) -> float:
    """Greedy speculative decoding replayed along each answer: a round at position i accepts the draft's
    run of consecutive hits (at most k; while it matches, its own tokens are the champion's, so teacher
    forcing is exact) plus the champion's own token. -> answer tokens / champion calls."""
    tokens = calls = 0
    for same in hits:
        i = 0
        while i < len(same):
            run = 0
            while run < k and i + run < len(same) and same[i + run]:
                run += 1
            i += run + 1
            calls += 1
        tokens += len(same)
    return tokens / max(calls, 1)


# -- export ---------------------------------------------------------------------------------------


def to_source(model, shape: DraftShape, vocab: np.ndarray, champion):
    """The trained draft as a ModelSource (Q8_0 weights, F32 norms) for export_onnx. The model's own
    weights are snapped to their Q8_0 values first, so the ONNX file computes what the model does."""
    import torch

    from pyodide_app.manifest import ModelConfig

    from .reference import dequantize
    from .source import ModelSource, Tensor, quantize

    def q8(values: np.ndarray, parameter=None) -> Tensor:  # values [out, in]
        tensor = quantize(values, "q8_0")
        if parameter is not None:
            with torch.no_grad():
                parameter.copy_(torch.from_numpy(dequantize(tensor).reshape(values.shape)))
        return tensor

    def f32(parameter) -> Tensor:
        values = parameter.detach().numpy().astype(np.float32)
        return Tensor("f32", values.shape, values)

    c = champion.config
    embedding = model.embed.weight.detach().numpy()
    tensors = {"token_embd.weight": q8(embedding, model.embed.weight)}
    for i, block in enumerate(model.blocks):
        for part, linear in (
            ("attn_q", block.q),
            ("attn_k", block.k),
            ("attn_v", block.v),
            ("attn_output", block.o),
            ("ffn_gate", block.gate),
            ("ffn_up", block.up),
            ("ffn_down", block.down),
        ):
            tensors[f"blk.{i}.{part}.weight"] = q8(linear.weight.detach().numpy(), linear.weight)
        tensors[f"blk.{i}.attn_norm.weight"] = f32(block.attn_norm.weight)
        tensors[f"blk.{i}.ffn_norm.weight"] = f32(block.ffn_norm.weight)
    tensors["output_norm.weight"] = f32(model.norm.weight)
    full_head = np.zeros((c.vocab_size, shape.d_model), np.float32)  # rows outside `vocab` are never exported
    full_head[vocab] = model.head.weight.detach().numpy()
    head = q8(full_head)
    with torch.no_grad():
        model.head.weight.copy_(torch.from_numpy(dequantize(head).reshape(full_head.shape)[vocab]))
    tensors["output.weight"] = head
    config = ModelConfig(
        architecture="llama",
        n_layers=shape.n_layers,
        d_model=shape.d_model,
        d_ffn=shape.d_ffn,
        n_heads=shape.n_heads,
        n_kv_heads=shape.n_kv_heads,
        head_dim=shape.d_model // shape.n_heads,
        rope_theta=c.rope_theta,
        rms_eps=c.rms_eps,
        context_length=c.context_length,
        vocab_size=c.vocab_size,
        tied_embeddings=False,
    )
    return ModelSource(
        f"distilled draft of {champion.origin}", config, champion.tokenizer, champion.chat_template, tensors
    )


def macs_per_token(config: dict, output_vocab: int) -> int:
    """Multiply-accumulates of the projections and the head for one token (attention scores excluded)."""
    d, kv = config["d_model"], config["n_kv_heads"] * config["head_dim"]
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * config["d_ffn"]
    return config["n_layers"] * per_layer + d * output_vocab
