"""Does a draft built from some of the champion's own layers generalise where a draft trained from scratch does
not? A measurement for issue 22 (the shipped draft is 4 blocks of width 256 trained from random weights on ~1M
answer tokens: data-bound, memorising, 34.5% on the independent set).

The truncated draft is a plain Llama the exporter already writes: the champion's embedding (frozen), the
champion's blocks at --layers (width 576, 9 heads, 3 KV heads, d_ffn 1536), its final norm, and a head over the
--vocab most frequent answer tokens initialised from the champion's (tied) head rows. So it starts from weights
pretrained on the champion's corpus, and fine-tuning only has to make the few blocks stand in for all 30.

Steps (one command, CPU):
  1. zero-shot: the truncated champion, untrained, on the independent set;
  2. fine-tune on the shipped draft's stored answers (answers.npz) as one-hot targets (its tokens: the champion's
     argmax for greedy answers, a draw for sampled ones), for --train-minutes;
  3. both drafts teacher-forced on the PyTorch champion's greedy answers to the independent set, at every answer
     position (what scripts/draft_eval.py counts): greedy agreement, and sum min(p, q) at temperature 0.7.

    .venv/bin/python scripts/truncated_draft_probe.py [--layers 0,29] [--vocab 6144] [--train-minutes 30]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from build_tools.distill import champion_source, prompt_encoder, token_answers  # noqa: E402
from build_tools.distill_data import open_champion  # noqa: E402
from build_tools.distill_train import choose_vocabulary, from_champion_blocks, macs_per_token, prebuilt_model, train  # noqa: E402
from build_tools.eval_set import independent_items  # noqa: E402
from build_tools.recipes import DEFAULT_DRAFT, default_package  # noqa: E402
from pyodide_app.package_check import load_manifest  # noqa: E402
from scripts.feature_draft_probe import overlap  # noqa: E402


def greedy_answers(champion, eos, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """The PyTorch champion's greedy answers (float32), one at a time in slot 0."""
    answers = []
    for ids in prompts:
        champion.clear(0)
        answer = [int(champion.feed([0], torch.tensor([ids]))[0].argmax())]
        while answer[-1] not in eos and len(answer) < tokens:
            answer.append(int(champion.feed([0], torch.tensor([[answer[-1]]]))[0].argmax()))
        answers.append(answer)
    return answers


def evaluate(drafts: dict, champion, eos, encode, tokens: int) -> dict:
    """drafts: name -> (model, vocab). Teacher-forced at every position of each independent item's greedy answer."""
    items = independent_items()
    prompts = [encode(item["messages"]) for item in items]
    answers = greedy_answers(champion, eos, prompts, tokens)
    hits = {name: [] for name in drafts}
    overlaps = {name: [] for name in drafts}
    kinds: dict[str, dict[str, list]] = {}
    with torch.no_grad():
        for item, ids, answer in zip(items, prompts, answers):
            s = torch.tensor(ids + answer)
            champion.clear(0)
            rows = champion.feed([0], s[None], first_row=len(ids) - 1)[0, :-1]  # [len(answer), V]
            truth = np.asarray(answer)
            for name, (model, vocab) in drafts.items():
                logits = model(s[None])[0, len(ids) - 1 : -1]
                same = vocab[logits.argmax(-1).numpy()] == truth
                hits[name] += same.tolist()
                overlaps[name] += overlap(rows, logits, vocab).tolist()
                kinds.setdefault(item["kind"], {}).setdefault(name, []).extend(same.tolist())
    return {
        "positions": len(next(iter(hits.values()))),
        "greedy": {name: float(np.mean(v)) for name, v in hits.items()},
        "sampled_t0_7": {name: float(np.mean(v)) for name, v in overlaps.items()},
        "per_kind": {
            kind: {"tokens": len(next(iter(by.values()))), **{n: float(np.mean(v)) for n, v in by.items()}}
            for kind, by in sorted(kinds.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", default="0,29", help="champion block indices, in order")
    parser.add_argument("--zero-shot-layers", default="", help="more layer lists to try untrained, ';'-separated")
    parser.add_argument("--vocab", type=int, default=6144)
    parser.add_argument("--train-minutes", type=float, default=30)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("build/truncated-draft-probe.json"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    package = default_package()
    manifest = load_manifest(package)
    champion, eos = open_champion(package, 1, 2048)
    c = champion.config
    encode = prompt_encoder(package, manifest)
    layers = [int(i) for i in args.layers.split(",")]

    answers = token_answers(DEFAULT_DRAFT / "answers.npz", set())
    vocab, covered = choose_vocabulary(answers, args.vocab, sorted(eos))
    source, _ = champion_source(package)
    model, shape = from_champion_blocks(source, layers, vocab)
    drafts = {"shipped": prebuilt_model(DEFAULT_DRAFT, c.vocab_size, c.rms_eps), "truncated": (model.eval(), vocab)}
    for other in filter(None, args.zero_shot_layers.split(";")):
        drafts[f"untrained {other}"] = (
            from_champion_blocks(source, [int(i) for i in other.split(",")], vocab)[0],
            vocab,
        )
    zero_shot = evaluate(drafts, champion, eos, encode, args.tokens)
    print(json.dumps({"zero_shot": zero_shot["greedy"], "coverage": covered}), flush=True)

    drafts = {"shipped": drafts["shipped"], "truncated": drafts["truncated"]}
    model.train()
    fit = train(model, answers, vocab, args.train_minutes, args.seed, lr=args.lr)
    model.eval()
    result = {
        "layers": layers,
        "shape": shape.__dict__,
        "coverage": covered,
        "macs_per_token": {
            "draft": macs_per_token({**shape.__dict__, "head_dim": c.head_dim}, len(vocab)),
            "champion": macs_per_token(manifest["champion"]["config"], c.vocab_size),
        },
        "data": {"answers": len(answers), "answer_tokens": int(sum(len(a.sequence) - a.prompt_len for a in answers))},
        "training": {**fit, "lr": args.lr},
        "zero_shot": zero_shot,
        "fine_tuned": evaluate(drafts, champion, eos, encode, args.tokens),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
