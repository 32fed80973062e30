"""`python -m build_tools distill`: champion answers -> a tiny trained draft -> draft.onnx + provenance.

DIR/champion/     the champion package (built from SRC unless SRC already is a package)
DIR/data/         training answers (resumable: a later run adds to them; never in git)
DIR/eval-data/    greedy answers to the fixed evaluation prompts (distill_prompts.evaluation_prompts)
DIR/draft.onnx, DIR/draft.json (its manifest entry), DIR/provenance.json, DIR/torch_reference.npz
                  (the trained model's logits on 4 held-out sequences): the files of a prebuilt draft
                  (build_tools/prebuilt_draft.py); the shipped one is build_tools/drafts/smollm2-135m-distilled
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from .distill_data import TOP_K, generate, read_token_archive, replay
from .distill_found import mixed_prompts, self_instruct_prompts
from .distill_prompts import evaluation_prompts, prompts_hash, training_prompts
from .distill_train import (
    Answer,
    DraftShape,
    agreement,
    build_model,
    choose_vocabulary,
    draft_vocabulary,
    load_answers,
    macs_per_token,
    projected_embedding,
    to_source,
    train,
    warm_start,
)

PROMPT_STREAMS = {  # --prompts: name -> (seed -> endless prompt items, what provenance says generated them)
    "templates": (training_prompts, "build_tools/distill_prompts.py training_prompts"),
    "mixed": (
        mixed_prompts,
        "build_tools/distill_found.py mixed_prompts (distill_found_prompts.jsonl.gz, 2 found : 1 template)",
    ),
    "selfinstruct": (
        self_instruct_prompts,
        "build_tools/distill_found.py self_instruct_prompts (distill_selfinstruct_prompts.jsonl.gz, "
        "distill_followup_prompts.jsonl.gz, distill_selfinstruct2_prompts.jsonl.gz, then mixed)",
    ),
}

SHAPES = {
    "small": DraftShape(),
    "tiny": DraftShape(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ffn=64, output_vocab=64),
}


def champion_package(spec: Path, out: Path, log) -> Path:
    """SRC itself when it is a package (has manifest.json), else a package built from it into out."""
    if (spec / "manifest.json").exists():
        return spec
    if not (out / "manifest.json").exists():
        from .package import build_package
        from .recipes import export_fallback, read_source

        log(f"[distill] packaging the champion {spec} -> {out}")
        build_package(read_source(str(spec)), out, None, None, None, export_fallback)
    return out


def champion_source(package: Path):
    from pyodide_app.package_check import load_manifest

    from .reference import read_champion
    from .source import ModelSource

    manifest = load_manifest(package)
    config, tensors = read_champion(package, manifest)
    tokenizer = json.loads((package / manifest["tokenizer"]).read_text())
    template = (package / manifest["chat_template"]).read_text()
    return ModelSource(str(package), config, tokenizer, template, tensors), manifest


def prompt_encoder(package: Path, manifest: dict):
    from pyodide_app.chat_template import ChatTemplate
    from pyodide_app.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_json((package / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((package / manifest["chat_template"]).read_text())
    return lambda messages: tokenizer.encode(template.render(messages))


def run_distill(
    spec: Path,
    out: Path,
    generate_minutes: float,
    train_minutes: float,
    seed: int,
    shape_name: str = "small",
    max_tokens: int = 128,
    max_answers: int | None = None,
    eval_per_task: int = 6,
    prompts: str = "templates",
    warm_from: Path | None = None,
    lr: float = 2e-3,
    replay_from: Path | None = None,
    replay_minutes: float | None = None,
    output_vocab: int | None = None,
    n_layers: int | None = None,
    log=print,
) -> dict:
    """Answer prompts of the `prompts` stream with the champion, train a draft of `shape_name` on every answer
    in out/data (from scratch, or continuing from the prebuilt draft in `warm_from`), export and measure it.
    `replay_from`: an export_tokens archive (e.g. a shipped draft's answers.npz) whose answers are rebuilt into
    out/data first, so a fresh machine starts from the data an earlier session generated; `replay_minutes`
    caps that rebuild, and the archive's answers it left out train on their tokens alone (token_answers)."""
    import torch

    from .export_onnx import export_llama
    from .reference import dequantize

    shape = SHAPES[shape_name] if output_vocab is None else replace(SHAPES[shape_name], output_vocab=output_vocab)
    shape = shape if n_layers is None else replace(shape, n_layers=n_layers)
    out.mkdir(parents=True, exist_ok=True)
    package = champion_package(Path(spec), out / "champion", log)
    source, manifest = champion_source(package)
    encode = prompt_encoder(package, manifest)
    if replay_from is not None:
        replay(package, Path(replay_from), out / "data", replay_minutes, log=log)
    stream_of, generator = PROMPT_STREAMS[prompts]
    stream = stream_of(seed) if max_answers is None else itertools.islice(stream_of(seed), max_answers)
    archived = frozenset() if replay_from is None else frozenset(m["id"] for m, _, _ in read_token_archive(replay_from))
    # a capped replay leaves archived answers out of data/: they train on their tokens, and are not answered again
    gen = generate(package, out / "data", stream, encode, generate_minutes, max_tokens, seed, skip=archived, log=log)
    log(f"[distill] data: +{gen['answers']} answers (+{gen['tokens']} tokens) this run, {gen['total_answers']} in all")
    held_out = evaluation_prompts(eval_per_task)
    generate(
        package,
        out / "eval-data",
        iter(held_out),
        encode,
        minutes=1e9,
        max_tokens=max_tokens,
        seed=seed,
        sampled_every=0,
        log=log,
    )

    answers = load_answers(out / "data")
    # what the replay's time left out: its tokens alone
    tokens_only = [] if replay_from is None else token_answers(Path(replay_from), {a.id for a in answers})
    answers += tokens_only
    eval_answers = load_answers(out / "eval-data")
    eos = manifest["generation"]["eos_ids"]
    # from scratch: EOS and this data's most frequent tokens; continuing a draft: its output ids, then those
    always = eos if warm_from is None else draft_vocabulary(Path(warm_from) / "draft.onnx").tolist()
    vocab, covered = choose_vocabulary(answers, shape.output_vocab, always)
    embedding = projected_embedding(
        dequantize(source.tensors["token_embd.weight"]).reshape(source.config.vocab_size, -1), shape.d_model
    )
    torch.manual_seed(seed)
    model = build_model(shape, embedding, embedding[vocab], source.config.rope_theta, source.config.rms_eps)
    if warm_from is not None:
        layers = warm_start(model, Path(warm_from) / "draft.onnx", vocab)
        grown = f", grown from {layers} to {shape.n_layers} layers" if layers < shape.n_layers else ""
        log(f"[distill] continuing from {warm_from}{grown}; {len(vocab)} output ids cover {covered:.3f} of the answers")
    fit = train(model, answers, vocab, train_minutes, seed, lr=lr, log=log)
    model.eval()
    draft_source = to_source(model, shape, vocab, source)  # snaps the weights to their exported Q8_0 values
    scores = agreement(model, eval_answers, vocab)
    entry = export_llama(draft_source, shape.n_layers, out / "draft.onnx", id_map=vocab)
    entry["description"] = (
        f"distilled {shape.n_layers}-layer d={shape.d_model} draft (build_tools distill, seed {seed})"
    )
    (out / "draft.json").write_text(json.dumps(entry))
    reference = torch_reference(model, eval_answers[:4])
    np.savez(out / "torch_reference.npz", **reference)
    gap = onnx_gap(out / "draft.onnx", entry, reference)
    prompt = [int(t) for t in eval_answers[0].sequence[: eval_answers[0].prompt_len]]
    wall = {
        "draft": onnx_ms_per_token(out / "draft.onnx", entry, prompt),
        "champion": onnx_ms_per_token(package / manifest["fallback"]["onnx"], manifest["fallback"], prompt),
    }
    champion_macs = macs_per_token(manifest["champion"]["config"], source.config.vocab_size)
    draft_macs = macs_per_token(entry["config"], len(vocab))
    provenance = {
        "champion_identity": manifest["identity"],
        "training_prompts": {"generator": generator, "seed": seed},
        "warm_start": warm_start_record(warm_from),
        "evaluation_prompts_sha256": prompts_hash(held_out),
        "data": {
            "answers": len(answers),
            "answer_tokens": int(sum(len(a.sequence) - a.prompt_len for a in answers)),
            "max_tokens": max_tokens,
            "tokens_only": len(tokens_only),
            "this_run": gen,
        },
        "shape": shape.__dict__,
        "output_vocab_coverage": covered,
        "seed": seed,
        "training": {**fit, "lr": lr},
        "evaluation": scores,
        "macs_per_token": {"draft": draft_macs, "champion": champion_macs, "ratio": draft_macs / champion_macs},
        "onnx_vs_torch_max_abs_logit_diff": gap,
        "onnxruntime_ms_per_token_one_thread": {**wall, "ratio": wall["draft"] / wall["champion"]},
        "draft_onnx_sha256": hashlib.sha256((out / "draft.onnx").read_bytes()).hexdigest(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1))
    log(
        f"[distill] agreement {scores['overall']:.3f} on {scores['tokens']} held-out tokens; "
        f"cost {100 * draft_macs / champion_macs:.1f}% of the champion's MACs, {wall['draft']:.2f} vs "
        f"{wall['champion']:.2f} ms "
        f"per token on onnxruntime (1 thread); tokens per call {scores['tokens_per_call']}; coverage {covered:.3f}"
    )
    return provenance


def token_answers(archive: Path, skip: set[str]) -> list[Answer]:
    """The archive's answers whose ids are not in `skip`, with the stored token as their only target: a one-hot
    top-K (the token at logit 0, the other K - 1 at -inf), so the soft term equals the hard one. For a greedy
    answer that token is the champion's argmax; for a sampled one a draw from its distribution."""
    answers = []
    for item, sequence, prompt_len in read_token_archive(archive):
        if item["id"] in skip:
            continue
        n = len(sequence) - prompt_len
        top_ids = np.zeros((n, TOP_K), np.int32)
        top_ids[:, 0] = sequence[prompt_len:]
        top_logits = np.full((n, TOP_K), -np.inf, np.float32)
        top_logits[:, 0] = 0.0
        answers.append(Answer(item["id"], item["task"], item["mode"], sequence, prompt_len, top_ids, top_logits))
    return answers


def warm_start_record(folder: Path | None) -> dict | None:
    """What a continued draft started from: the earlier draft's file hash, data and training."""
    if folder is None:
        return None
    earlier = json.loads((Path(folder) / "provenance.json").read_text())
    return {key: earlier.get(key) for key in ("draft_onnx_sha256", "training_prompts", "data", "training")}


def onnx_ms_per_token(path: Path, entry: dict, prompt: list[int], steps: int = 32) -> float:
    """Wall milliseconds per one-token decode step of an exported graph on onnxruntime with one thread."""
    from pyodide_app.native.onnx_draft import OnnxDraftRuntime

    runtime = OnnxDraftRuntime(path, entry, threads=1)
    token = runtime.step(prompt, 0.0, 1.0).token
    started = time.perf_counter()
    for _ in range(steps):
        token = runtime.step([token], 0.0, 1.0).token
    return 1000 * (time.perf_counter() - started) / steps


def torch_reference(model, answers) -> dict:
    """The trained model's last-position logits on whole held-out sequences: sequences int64 [n] concatenated,
    lengths [m], logits float32 [m, V']. Shipped with the draft so a test can check draft.onnx against it."""
    import torch

    with torch.no_grad():
        logits = [model(torch.from_numpy(a.sequence)[None])[0, -1].numpy() for a in answers]
    return {
        "sequences": np.concatenate([a.sequence for a in answers]),
        "lengths": np.asarray([len(a.sequence) for a in answers]),
        "logits": np.stack(logits),
    }


def onnx_gap(path: Path, entry: dict, reference: dict) -> float:
    """Largest |logit difference| between the graph at `path` (onnxruntime) and a torch_reference()."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    c = entry["config"]
    empty = np.zeros((1, c["n_kv_heads"], 0, c["head_dim"]), np.float32)
    past = {f"past_{kind}_{i}": empty for i in range(c["n_layers"]) for kind in ("key", "value")}
    worst, start = 0.0, 0
    for length, expected in zip(reference["lengths"], reference["logits"]):
        ids = np.asarray(reference["sequences"][start : start + length], np.int64)[None]
        feeds = {"input_ids": ids, "temperature": np.zeros(1, np.float32), "uniform": np.ones(1, np.float32), **past}
        logits = session.run(["logits"], feeds)[0][0]  # the last position
        worst, start = max(worst, float(np.abs(logits - expected).max())), start + length
    return worst
