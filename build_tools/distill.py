"""`python -m build_tools distill`: champion answers -> a tiny trained draft -> draft.onnx + provenance.

    DIR/champion/     the champion package (built from SRC unless SRC already is a package)
    DIR/data/         training answers (resumable: a later run adds to them; never in git)
    DIR/eval-data/    greedy answers to the fixed evaluation prompts (distill_prompts.evaluation_prompts)
    DIR/draft.onnx, DIR/draft.json (its manifest entry), DIR/provenance.json
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from pathlib import Path

import numpy as np

from .distill_data import generate
from .distill_prompts import evaluation_prompts, prompts_hash, training_prompts
from .distill_train import DraftShape, agreement, build_model, choose_vocabulary, load_answers, macs_per_token, \
    projected_embedding, to_source, train

SHAPES = {"small": DraftShape(), "tiny": DraftShape(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ffn=64, output_vocab=64)}


def champion_package(spec: Path, out: Path, log) -> Path:
    """SRC itself when it is a package (has manifest.json), else a package built from it into out."""
    if (spec / "manifest.json").exists():
        return spec
    if not (out / "manifest.json").exists():
        from .__main__ import export_fallback, read_source
        from .package import build_package

        log(f"[distill] packaging the champion {spec} -> {out}")
        build_package(read_source(str(spec)), out, None, None, None, export_fallback)
    return out


def champion_source(package: Path):
    from .source import ModelSource
    from .verify import load_manifest, read_champion

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
    return lambda text: tokenizer.encode(template.render([{"role": "user", "content": text}]))


def run_distill(spec: Path, out: Path, generate_minutes: float, train_minutes: float, seed: int, shape_name: str = "small",
                max_tokens: int = 128, max_answers: int | None = None, eval_per_task: int = 6, log=print) -> dict:
    import torch

    from .export_onnx import export_llama
    from .reference import dequantize

    shape = SHAPES[shape_name]
    out.mkdir(parents=True, exist_ok=True)
    package = champion_package(Path(spec), out / "champion", log)
    source, manifest = champion_source(package)
    encode = prompt_encoder(package, manifest)
    stream = training_prompts(seed) if max_answers is None else itertools.islice(training_prompts(seed), max_answers)
    gen = generate(package, out / "data", stream, encode, generate_minutes, max_tokens, seed, log=log)
    log(f"[distill] data: +{gen['answers']} answers (+{gen['tokens']} tokens) this run, {gen['total_answers']} in all")
    held_out = evaluation_prompts(eval_per_task)
    generate(package, out / "eval-data", iter(held_out), encode, minutes=1e9, max_tokens=max_tokens, seed=seed,
             sampled_every=10**9, log=log)

    answers = load_answers(out / "data")
    eval_answers = load_answers(out / "eval-data")
    eos = manifest["generation"]["eos_ids"]
    vocab, coverage = choose_vocabulary(answers, shape.output_vocab, eos)
    embedding = projected_embedding(dequantize(source.tensors["token_embd.weight"]).reshape(source.config.vocab_size, -1), shape.d_model)
    torch.manual_seed(seed)
    model = build_model(shape, embedding, embedding[vocab], source.config.rope_theta, source.config.rms_eps)
    fit = train(model, answers, vocab, train_minutes, seed, log=log)
    model.eval()
    draft_source = to_source(model, shape, vocab, source)  # snaps the weights to their exported Q8_0 values
    scores = agreement(model, eval_answers, vocab)
    entry = export_llama(draft_source, shape.n_layers, out / "draft.onnx", id_map=vocab)
    (out / "draft.json").write_text(json.dumps(entry))
    onnx_gap = onnx_vs_torch(model, out / "draft.onnx", entry, eval_answers[:4])
    champion_macs = macs_per_token(manifest["champion"]["config"], source.config.vocab_size)
    draft_macs = macs_per_token(entry["config"], len(vocab))
    provenance = {
        "champion_identity": manifest["identity"],
        "training_prompts": {"generator": "build_tools/distill_prompts.py training_prompts", "seed": seed},
        "evaluation_prompts_sha256": prompts_hash(held_out),
        "data": {"answers": len(answers), "answer_tokens": int(sum(len(a.sequence) - a.prompt_len for a in answers)),
                 "max_tokens": max_tokens, "this_run": gen},
        "shape": shape.__dict__, "output_vocab_coverage": coverage, "seed": seed, "training": fit,
        "evaluation": scores, "macs_per_token": {"draft": draft_macs, "champion": champion_macs, "ratio": draft_macs / champion_macs},
        "onnx_vs_torch_max_abs_logit_diff": onnx_gap,
        "draft_onnx_sha256": hashlib.sha256((out / "draft.onnx").read_bytes()).hexdigest(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1))
    log(f"[distill] agreement {scores['overall']:.3f} on {scores['tokens']} held-out tokens; "
        f"cost {100 * draft_macs / champion_macs:.1f}% of the champion's MACs; coverage {coverage:.3f}")
    return provenance


def onnx_vs_torch(model, path: Path, entry: dict, answers) -> float:
    """Largest |logit difference| between the exported graph (onnxruntime) and the model, over full sequences."""
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    c = entry["config"]
    worst = 0.0
    for a in answers:
        empty = np.zeros((1, c["n_kv_heads"], 0, c["head_dim"]), np.float32)
        feeds = {"input_ids": a.sequence[None], "temperature": np.zeros(1, np.float32), "uniform": np.ones(1, np.float32),
                 **{f"past_{kind}_{i}": empty for i in range(c["n_layers"]) for kind in ("key", "value")}}
        logits = session.run(["logits"], feeds)[0][0]  # the last position
        with torch.no_grad():
            expected = model(torch.from_numpy(a.sequence)[None])[0, -1].numpy()
        worst = max(worst, float(np.abs(logits - expected).max()))
    return worst
