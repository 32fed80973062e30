"""The distillation pipeline on the synthetic model, tiny configuration (seconds): data generation is
resumable and incremental, the batched PyTorch champion that answers computes champion.onnx's logits,
the evaluation prompts are disjoint from training, the exported ONNX draft computes what the trained
PyTorch model computes, and the provenance says what was done. The shipped SmolLM2 draft: intact,
its ONNX output equals its PyTorch model's, its identity is the default champion's."""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import replace

import numpy as np
import onnx
import pytest
import torch

from build_tools.distill import champion_source, onnx_gap
from build_tools.distill_champion import BatchedChampion
from build_tools.distill_data import pending_jobs, sample_top_p
from build_tools.distill_found import (
    FOLLOW_UPS,
    FOUND_PER_TEMPLATE,
    SELF_INSTRUCT,
    SELF_INSTRUCT_2,
    found_prompts,
    frozen_prompts,
    mixed_prompts,
    self_instruct_prompts,
)
from build_tools.distill_prompts import EVAL_TOPICS, TRAIN_TOPICS, evaluation_prompts, training_prompts
from build_tools.distill_train import (
    Answer,
    DraftShape,
    batch_loss,
    batches,
    build_model,
    choose_vocabulary,
    draft_vocabulary,
    from_champion_blocks,
    optimizer_step,
    tokens_per_call,
    warm_start,
)
from build_tools.prebuilt_draft import read_prebuilt
from build_tools.recipes import DEFAULT_DRAFT
from build_tools.synth import synth_models
from pyodide_app.native.dense_champion import open_runtime

from .conftest import run_build_tools
from .model_fixtures import write_gguf
from .test_package import assert_one_line_error
from .test_reference_and_onnx import matmul_bits


def test_evaluation_prompts_are_fixed_and_never_trained_on():
    held_out = evaluation_prompts()
    assert held_out == evaluation_prompts()  # reproducible
    assert not set(EVAL_TOPICS) & set(TRAIN_TOPICS)
    training = {p["prompt"] for p in itertools.islice(training_prompts(0), 5000)}
    assert not training & {p["prompt"] for p in held_out}
    assert {p["task"] for p in held_out} == {p["task"] for p in itertools.islice(training_prompts(0), 20)}


def test_the_mixed_stream_interleaves_found_and_template_prompts_in_a_fixed_order():
    first = list(itertools.islice(mixed_prompts(0), 3000))
    assert first == list(itertools.islice(mixed_prompts(0), 3000))  # a later run resumes where one stopped
    assert len({p["id"] for p in first}) == len(first)
    kinds = ["found" if p["id"].startswith("found-") else "template" for p in first]
    assert kinds[: FOUND_PER_TEMPLATE + 1] == ["found"] * FOUND_PER_TEMPLATE + ["template"]
    assert kinds.count("found") == 2000 and kinds.count("template") == 1000
    found = found_prompts()
    assert {p["task"] for p in found} >= {"everyday", "code", "foreign", "long", "system"}
    assert any("messages" in p for p in found) and all(("messages" in p) != ("prompt" in p) for p in found)
    modes = {(kind, job.mode) for kind, job in zip(kinds, pending_jobs(first, set(), lambda m: [1], 0, 3))}
    assert modes == {("found", "greedy"), ("found", "sampled"), ("template", "greedy"), ("template", "sampled")}


def test_the_self_instruct_stream_answers_every_written_prompt_then_the_follow_ups_then_the_mixed_stream():
    """Every prompt of the frozen self-instruct file once, in file order, then every two-turn follow-up chat, then
    every prompt of the second self-instruct round, then the mixed stream from its start (a run that continues the
    shipped draft's data skips the prompts already answered); both answer modes occur in each frozen part. Fails
    if the stream drops, repeats or reorders prompts."""
    parts = [frozen_prompts(SELF_INSTRUCT), frozen_prompts(FOLLOW_UPS), frozen_prompts(SELF_INSTRUCT_2)]
    frozen = sum(len(part) for part in parts)
    stream = list(itertools.islice(self_instruct_prompts(0), frozen + 30))
    assert stream[:frozen] == [item for part in parts for item in part]
    assert stream[frozen:] == list(itertools.islice(mixed_prompts(0), 30))
    assert len({p["id"] for p in stream}) == len(stream)
    written, chats, second = parts
    assert all(p["task"].startswith("self_instruct/") and p["prompt"].strip() for p in written + second)
    assert all(p["task"].startswith("followup/") and p["messages"][-1]["content"].strip() for p in chats)
    for prompts in (written[:60], chats[:60], second[:60]):
        assert {job.mode for job in pending_jobs(prompts, set(), lambda m: [1], 0, 3)} == {"greedy", "sampled"}


@pytest.mark.parametrize("grow", [0, 2])
def test_warm_start_loads_the_shipped_drafts_weights(grow):
    """The shipped draft.onnx's weights, read back into the PyTorch model, compute its recorded logits: what
    `distill --warm-start` continues from is that draft — also when the head grows by 512 more output ids
    (its rows land on their tokens among the new ones), and when the model grows two more layers (identity
    blocks at first). Fails if a norm or projection lands in the wrong place (checked: swapping the two norms
    of a block gives 8.7), head rows keep the draft's order, or a grown block is not the identity (checked:
    leaving its down projection random)."""
    entry = read_prebuilt(DEFAULT_DRAFT).entry
    c = entry["config"]
    shipped = c["n_layers"]
    shape = replace(DraftShape(), n_layers=shipped + grow)
    base = draft_vocabulary(DEFAULT_DRAFT / "draft.onnx")
    assert base.tolist() == entry["id_map"]
    extra = np.setdiff1d(np.arange(c["vocab_size"]), base)[::50][:512]
    vocab = np.union1d(base, extra)
    embedding = np.random.default_rng(0).normal(size=(c["vocab_size"], shape.d_model)).astype(np.float32)
    model = build_model(
        replace(shape, output_vocab=len(vocab)), embedding, embedding[vocab], c["rope_theta"], c["rms_eps"]
    )
    assert warm_start(model, DEFAULT_DRAFT / "draft.onnx", vocab) == shipped
    with np.load(DEFAULT_DRAFT / "torch_reference.npz") as data:
        sequences, lengths, expected = data["sequences"], data["lengths"], data["logits"]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    with torch.no_grad():
        got = [
            model(torch.from_numpy(sequences[s : s + n].astype(np.int64))[None])[0, -1] for s, n in zip(starts, lengths)
        ]
    rows = np.searchsorted(vocab, base)
    assert np.abs(torch.stack(got).numpy()[:, rows] - expected).max() < 1e-4
    assert choose_vocabulary([], 9000, base.tolist())[0].tolist() == base.tolist()  # nothing to grow from
    with pytest.raises(ValueError, match="does not contain"):
        warm_start(model, DEFAULT_DRAFT / "draft.onnx", np.setdiff1d(vocab, base[:1]))
    shallow = build_model(
        replace(shape, n_layers=shipped - 1), embedding, embedding[base], c["rope_theta"], c["rms_eps"]
    )
    with pytest.raises(ValueError, match=f"has {shipped} layers, more than the {shipped - 1}"):
        warm_start(shallow, DEFAULT_DRAFT / "draft.onnx", base)


def test_distill_tiny_end_to_end_and_resumable(synth_package, tmp_path):
    out = tmp_path / "distill"
    common = [
        "distill",
        "--champion",
        str(synth_package),
        "--out",
        str(out),
        "--minutes",
        "0.05",
        "--shape",
        "tiny",
        "--max-tokens",
        "16",
        "--eval-per-task",
        "1",
    ]
    first = run_build_tools(*common, "--max-answers", "40")
    assert first.returncode == 0, first.stderr[-2000:]
    lines = (out / "data" / "index.jsonl").read_text().splitlines()
    assert len(lines) == 40 and {json.loads(line)["mode"] for line in lines} == {"greedy", "sampled"}
    second = run_build_tools(*common, "--max-answers", "56")  # resumes: only the 16 new prompts are answered
    assert second.returncode == 0, second.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in (out / "data" / "index.jsonl").read_text().splitlines()]
    assert len(ids) == 56 and len(set(ids)) == 56
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["data"]["answers"] == 56 and provenance["data"]["this_run"]["answers"] == 16
    assert provenance["onnx_vs_torch_max_abs_logit_diff"] < 1e-4
    assert 0 <= provenance["evaluation"]["overall"] <= 1 and provenance["evaluation"]["per_task"]
    assert 0 < provenance["output_vocab_coverage"] <= 1
    champion = json.loads((synth_package / "manifest.json").read_text())
    assert provenance["champion_identity"]["tokenizer"] == champion["identity"]["tokenizer"]
    entry = json.loads((out / "draft.json").read_text())
    assert len(entry["id_map"]) == entry["output_vocab"] == 64 and 2 in entry["id_map"]  # EOS is always emittable
    assert set(provenance["evaluation"]["tokens_per_call"]) == {"2", "4", "8"}
    assert all(1 <= v <= 9 for v in provenance["evaluation"]["tokens_per_call"].values())
    wall = provenance["onnxruntime_ms_per_token_one_thread"]
    assert wall["draft"] > 0 and wall["champion"] > 0

    # the output folder is a prebuilt draft: package the champion with it
    package = tmp_path / "pkg"
    result = run_build_tools(
        "package", "--champion", str(synth_source(tmp_path)), "--draft", str(out), "--out", str(package), "--no-golden"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((package / "manifest.json").read_text())
    assert manifest["draft"]["kind"] == "prebuilt" and manifest["draft"]["id_map"] == entry["id_map"]
    assert manifest["identity"]["draft_tokenizer"] == manifest["identity"]["tokenizer"]
    assert (package / "draft.onnx").read_bytes() == (out / "draft.onnx").read_bytes()
    assert run_build_tools("check", str(package)).returncode == 0
    # draft-upgrade on a draft it already upgraded leaves it byte for byte, and its history once
    assert run_build_tools("draft-upgrade", str(out)).returncode == 0
    upgraded, history = (out / "draft.onnx").read_bytes(), (out / "provenance.json").read_text()
    assert run_build_tools("draft-upgrade", str(out)).returncode == 0
    assert (out / "draft.onnx").read_bytes() == upgraded and (out / "provenance.json").read_text() == history

    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged, ignore=shutil.ignore_patterns("data", "eval-data", "champion"))
    blob = bytearray((damaged / "draft.onnx").read_bytes())
    blob[len(blob) // 2] ^= 1
    (damaged / "draft.onnx").write_bytes(bytes(blob))
    assert_one_line_error(
        run_build_tools(
            "package",
            "--champion",
            str(synth_source(tmp_path)),
            "--draft",
            str(damaged),
            "--out",
            str(tmp_path / "pkg2"),
            "--no-golden",
        ),
        "draft.onnx",
        "sha256",
    )


def test_distill_continues_a_draft_on_the_mixed_stream(synth_package, tmp_path):
    """`--warm-start` trains on from an earlier draft (its weights and output vocabulary), `--replay` rebuilds
    the earlier run's answers from their token ids first, `--prompts mixed` answers found prompts (multi-message
    ones too) and templates, and the provenance says so; with `--replay-minutes 0` the archive's prompts are not
    answered again (they train on their stored tokens)."""
    from build_tools.distill_data import export_tokens

    common = ["distill", "--champion", str(synth_package), "--minutes", "0.03", "--shape", "tiny"]
    common += ["--max-tokens", "12", "--eval-per-task", "1", "--max-answers", "24"]
    first = run_build_tools(*common, "--out", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr[-2000:]
    assert export_tokens(tmp_path / "first" / "data", tmp_path / "answers.npz") == 24
    second = run_build_tools(
        *common,
        *("--out", str(tmp_path / "second"), "--prompts", "mixed", "--warm-start", str(tmp_path / "first")),
        *("--replay", str(tmp_path / "answers.npz")),
    )
    assert second.returncode == 0, second.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in (tmp_path / "second" / "data" / "index.jsonl").read_text().splitlines()]
    # the 24 replayed template answers, then the mixed stream's 16 found prompts (its 8 templates are among them)
    assert len(ids) == len(set(ids)) == 40 and sum(i.startswith("found-") for i in ids) == 16
    earlier = json.loads((tmp_path / "first" / "provenance.json").read_text())
    provenance = json.loads((tmp_path / "second" / "provenance.json").read_text())
    assert provenance["warm_start"]["draft_onnx_sha256"] == earlier["draft_onnx_sha256"]
    assert "mixed_prompts" in provenance["training_prompts"]["generator"]
    entries = [json.loads((tmp_path / name / "draft.json").read_text()) for name in ("first", "second")]
    assert entries[0]["id_map"] == entries[1]["id_map"]  # the earlier draft's output vocabulary, not a new one
    # a replay capped at 0 min rebuilds nothing, and the archive's prompts are not answered again
    third = run_build_tools(
        *common[:-1], "28", *("--out", str(tmp_path / "third"), "--replay", str(tmp_path / "answers.npz")),
        *("--replay-minutes", "0"),
    )  # fmt: skip
    assert third.returncode == 0, third.stderr[-2000:]
    ids = [json.loads(line)["id"] for line in (tmp_path / "third" / "data" / "index.jsonl").read_text().splitlines()]
    assert sorted(ids) == [f"s0-{i}" for i in range(24, 28)]
    data = json.loads((tmp_path / "third" / "provenance.json").read_text())["data"]
    assert (data["answers"], data["tokens_only"], data["this_run"]["answers"]) == (28, 24, 4)


def synth_source(tmp_path):
    """The synthetic champion as a GGUF file (what `package --champion` reads)."""
    path = tmp_path / "synth-champion.gguf"
    if not path.exists():
        write_gguf(synth_models(0)[0], path)
    return path


def test_answers_kept_as_token_ids_replay_to_the_same_targets(synth_package, tmp_path):
    """export_tokens keeps only token ids (what goes into git); replay teacher-forces the champion over them
    and rebuilds the top-K targets that generation recorded step by step: same sequences, same top ids,
    logits equal to float16 rounding. Fails if replay reads the rows one position off (checked)."""
    from build_tools.distill import prompt_encoder
    from build_tools.distill_data import export_tokens, generate, replay
    from build_tools.distill_train import load_answers
    from pyodide_app.package_check import load_manifest

    encode = prompt_encoder(synth_package, load_manifest(synth_package))
    prompts = itertools.islice(mixed_prompts(0), 12)  # found (one with a system message) and template prompts
    generate(synth_package, tmp_path / "data", prompts, encode, minutes=5, max_tokens=10, slots=4, log=lambda _: 0)
    assert export_tokens(tmp_path / "data", tmp_path / "answers.npz") == 12
    replay(synth_package, tmp_path / "answers.npz", tmp_path / "again", log=lambda _: 0)
    first = {a.id: a for a in load_answers(tmp_path / "data")}
    again = {a.id: a for a in load_answers(tmp_path / "again")}
    assert first.keys() == again.keys()
    for key, a in first.items():
        b = again[key]
        assert (
            (a.sequence == b.sequence).all() and a.prompt_len == b.prompt_len and (a.mode, a.task) == (b.mode, b.task)
        )
        assert (a.top_ids[:, 0] == b.top_ids[:, 0]).all()
        assert np.abs(a.top_logits - b.top_logits).max() < 0.02


def test_a_capped_replay_leaves_the_rest_to_their_tokens_alone(synth_package, tmp_path):
    """replay(minutes=0) rebuilds nothing (a later call resumes); token_answers gives the archive's answers with
    the stored token as a one-hot target, so their loss is the hard cross-entropy twice (hard + soft). Fails
    if the one-hot sits on another column's token or the -inf columns leak probability (both checked)."""
    from build_tools.distill import prompt_encoder, token_answers
    from build_tools.distill_data import done_ids, export_tokens, generate, replay
    from build_tools.distill_train import load_answers
    from pyodide_app.package_check import load_manifest

    encode = prompt_encoder(synth_package, load_manifest(synth_package))
    prompts = itertools.islice(mixed_prompts(0), 6)
    generate(synth_package, tmp_path / "data", prompts, encode, minutes=5, max_tokens=10, slots=4, log=lambda _: 0)
    assert export_tokens(tmp_path / "data", tmp_path / "answers.npz") == 6
    replay(synth_package, tmp_path / "answers.npz", tmp_path / "again", minutes=0, log=lambda _: 0)
    assert done_ids(tmp_path / "again") == set()
    generated = {a.id: a for a in load_answers(tmp_path / "data")}
    skip = set(list(generated)[:2])
    tokens_only = token_answers(tmp_path / "answers.npz", skip)
    assert sorted(a.id for a in tokens_only) == sorted(set(generated) - skip)
    for a in tokens_only:
        b = generated[a.id]
        assert (a.sequence == b.sequence).all() and a.prompt_len == b.prompt_len
        assert (a.top_ids[:, 0] == a.sequence[a.prompt_len :]).all() and a.top_ids.shape == b.top_ids.shape
        if a.mode == "greedy":  # the stored token is the champion's argmax
            assert (a.top_ids[:, 0] == b.top_ids[:, 0]).all()
    size = int(max(a.sequence.max() for a in tokens_only)) + 1
    vocab = np.arange(size)
    model = tiny_draft(np.random.default_rng(3), size, vocab)
    with torch.no_grad():
        hard = float(batch_loss(model, tokens_only, vocab, 0.0))
        assert float(batch_loss(model, tokens_only, vocab, 1.0)) == pytest.approx(2 * hard, rel=1e-5)


def test_batched_champion_equals_champion_onnx(synth_package):
    """Prefill into two slots of different lengths, decode them together, reuse a slot: the logits of every
    step equal champion.onnx's (one sequence at a time) to float32 rounding."""
    source, manifest = champion_source(synth_package)
    batched = BatchedChampion(source.config, source.tensors, slots=3, capacity=64)
    onnx = open_runtime(synth_package, manifest)
    prompts = {0: [1, 70, 80, 90, 33, 12], 2: [1, 5, 9]}
    rows = {s: batched.feed([s], torch.tensor([p]))[0] for s, p in prompts.items()}
    sequences = {s: list(p) for s, p in prompts.items()}
    for _ in range(4):
        tokens = {s: int(rows[s].argmax()) for s in sorted(rows)}
        for s, t in tokens.items():
            sequences[s].append(t)
        out = batched.feed(sorted(tokens), torch.tensor([[tokens[s]] for s in sorted(tokens)]))
        rows = dict(zip(sorted(tokens), out))
    batched.clear(0)
    reused = batched.feed([0], torch.tensor([[1, 44, 45]]))[0]
    worst = 0.0
    for s, sequence in sequences.items():
        onnx.reset()
        worst = max(worst, float(np.abs(onnx.run_array(sequence)[-1] - rows[s].numpy()).max()))
    onnx.reset()
    worst = max(worst, float(np.abs(onnx.run_array([1, 44, 45])[-1] - reused.numpy()).max()))
    assert worst < 1e-4, worst


def test_a_draft_from_every_champion_block_computes_the_champions_logits(synth_package):
    """from_champion_blocks with all of the champion's blocks in order is the champion itself, at the head rows it
    keeps; a draft from fewer blocks computes something else. Fails when a projection, a norm or the head rows are
    copied from the wrong tensor, or when the blocks are taken out of order."""
    source, _ = champion_source(synth_package)
    c = source.config
    batched = BatchedChampion(source.config, source.tensors, slots=1, capacity=64)
    sequence = torch.tensor([[1, 70, 80, 90, 33, 12, 44]])
    expected = batched.feed([0], sequence, first_row=0)[0]  # [T, V]
    vocab = np.asarray([2, 5, 33, 70, 71, c.vocab_size - 1])
    whole, shape = from_champion_blocks(source, list(range(c.n_layers)), vocab)
    assert (shape.d_model, shape.n_layers, shape.output_vocab) == (c.d_model, c.n_layers, len(vocab))
    with torch.no_grad():
        got = whole(sequence)[0]
    assert float((got - expected[:, vocab]).abs().max()) < 1e-4
    shortened, _ = from_champion_blocks(source, list(range(c.n_layers))[::-1], vocab)
    with torch.no_grad():
        assert float((shortened(sequence)[0] - expected[:, vocab]).abs().max()) > 1e-2
    with pytest.raises(ValueError, match="champion layers"):
        from_champion_blocks(source, [c.n_layers], vocab)


def test_top_p_sampling_sorts_only_the_entries_that_can_hold_the_mass():
    """sample_top_p draws, for the same generator state, the token a full sort of the row gives: on peaked, flat
    and heavy-tailed rows and at several temperatures and top-p. Fails when the candidate cut can drop an entry of
    the top-p set (a cut above (1 - top_p) / V without the full-sort fallback)."""

    def full_sort(logits, temperature, top_p, rng):
        probs = np.exp(((logits - logits.max()) / temperature).astype(np.float64))
        probs /= probs.sum()
        order = np.argsort(-probs, kind="stable")
        keep = order[: int(np.searchsorted(np.cumsum(probs[order]), top_p) + 1)]
        return int(rng.choice(keep, p=probs[keep] / probs[keep].sum()))

    rng = np.random.default_rng(7)
    rows = [rng.normal(0, scale, 4096).astype(np.float32) for scale in (0.01, 0.5, 2.0, 8.0)]
    rows.append(np.zeros(4096, np.float32))
    rows.append(rng.standard_cauchy(4096).astype(np.float32))
    for i, row in enumerate(rows):
        for temperature, top_p in ((0.8, 0.95), (0.7, 0.9), (1.0, 0.999), (1.5, 0.5)):
            for draw in range(5):
                seed = [i, draw]
                got = sample_top_p(row, temperature, top_p, np.random.default_rng(seed))
                assert got == full_sort(row, temperature, top_p, np.random.default_rng(seed))


def random_answers(count: int, vocab: int, rng: np.random.Generator, k: int = 4) -> list[Answer]:
    """Answers of random token ids: prompts of 3-40 tokens, answers of 1-30, random top-K logits."""
    out = []
    for i in range(count):
        prompt_len, answer_len = int(rng.integers(3, 40)), int(rng.integers(1, 30))
        out.append(
            Answer(
                f"a{i}",
                "test",
                "greedy",
                rng.integers(0, vocab, prompt_len + answer_len).astype(np.int64),
                prompt_len,
                rng.integers(0, vocab, (answer_len, k)).astype(np.int32),
                rng.normal(size=(answer_len, k)).astype(np.float32),
            )
        )
    return out


def tiny_draft(rng, tokens: int, vocab: np.ndarray):
    """A 1-layer d = 16 draft over `tokens` input ids (random embedding) emitting the ids in `vocab`."""
    shape = DraftShape(d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ffn=32, output_vocab=len(vocab))
    embedding = rng.normal(size=(tokens, 16)).astype(np.float32)
    torch.manual_seed(0)
    return build_model(shape, embedding, embedding[vocab], 10000.0, 1e-5)


def test_the_loss_runs_the_head_on_answer_positions_only_and_equals_the_full_one():
    """batch_loss gathers the answer positions before the head; the same loss over full logits [B, W, V']
    (every position, padding included) picks out the same rows. Fails if a position is off by one (the row
    that predicts answer token j is prompt_len - 1 + j) or a padded row is counted."""
    rng = np.random.default_rng(1)
    vocab = np.sort(rng.choice(64, 40, replace=False)).astype(np.int64)  # some answer tokens lie outside it
    model = tiny_draft(rng, 64, vocab)
    batch = random_answers(5, 64, rng)
    index_of = np.full(64, -1)
    index_of[vocab] = np.arange(len(vocab))
    with torch.no_grad():
        log_q = torch.log_softmax(
            model(torch.from_numpy(np.stack([np.pad(a.sequence, (0, 80 - len(a.sequence))) for a in batch]))), -1
        )
        total, count = 0.0, 0
        for row, a in enumerate(batch):
            for j, token in enumerate(a.sequence[a.prompt_len :]):
                q = log_q[row, a.prompt_len - 1 + j]
                if index_of[token] >= 0:
                    total -= float(q[index_of[token]])
                p = torch.softmax(torch.from_numpy(a.top_logits[j]), -1) * torch.from_numpy(index_of[a.top_ids[j]] >= 0)
                p = p / p.sum().clamp_min(1e-9)
                total -= 0.5 * float((p * q[torch.from_numpy(np.maximum(index_of[a.top_ids[j]], 0))]).sum())
                count += 1
        assert float(batch_loss(model, batch, vocab, 0.5)) == pytest.approx(total / count, rel=1e-5)


def test_one_optimizer_step_lowers_its_batchs_loss_and_leaves_the_frozen_embedding():
    """optimizer_step returns the loss it was given and moves the trainable weights against it. Fails if the
    step is skipped (the training loop would log losses and never learn) or the frozen embedding moves."""
    rng = np.random.default_rng(2)
    vocab = np.arange(48, dtype=np.int64)
    model = tiny_draft(rng, 64, vocab)
    batch = random_answers(4, 64, rng)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    embedding = model.embed.weight.detach().clone()
    before = batch_loss(model, batch, vocab, 1.0)
    given = float(before.detach())
    assert optimizer_step(optimizer, params, before) == pytest.approx(given)
    assert float(batch_loss(model, batch, vocab, 1.0).detach()) < given - 1e-3
    assert torch.equal(model.embed.weight, embedding)


def test_batches_hold_every_answer_once_in_similar_lengths():
    """An epoch's batches partition the answers, each within the padded-token budget unless it is one long
    answer, and sorting by length within pools pads less than random batching would (fails with the pool
    left unsorted)."""
    rng = np.random.default_rng(2)
    answers = random_answers(600, 50, rng)
    cut = list(batches(answers, 256, np.random.default_rng(0), pool=16))
    ids = [a.id for batch in cut for a in batch]
    assert sorted(ids) == sorted(a.id for a in answers)
    widths = [max(len(a.sequence) for a in batch) * len(batch) for batch in cut]
    assert all(w <= 256 or len(b) == 1 for w, b in zip(widths, cut))
    real = sum(len(a.sequence) for a in answers)
    assert real / sum(widths) > 0.9  # random batches of these lengths: about 0.6


def test_tokens_per_call_replays_greedy_rounds():
    hits = [np.array([True, True, False, True])]
    assert tokens_per_call(hits, 2) == 4 / 2  # [T T | F] [T]: accepted runs 2, 1 -> 2 calls
    assert tokens_per_call(hits, 1) == 4 / 3  # [T | T] [F] [T]
    assert tokens_per_call([np.zeros(5, bool)], 8) == 1.0  # nothing accepted: one token per call


def test_shipped_draft_is_intact_and_its_onnx_equals_its_pytorch_model():
    draft = read_prebuilt(DEFAULT_DRAFT)  # raises if draft.onnx is not the file provenance.json describes
    assert (DEFAULT_DRAFT / "draft.onnx").stat().st_size <= 25 * 2**20
    with np.load(DEFAULT_DRAFT / "torch_reference.npz") as data:
        reference = {k: data[k] for k in data.files}
    assert len(reference["lengths"]) == 4 and reference["logits"].shape[1] == draft.entry["output_vocab"]
    assert 8 not in matmul_bits(onnx.load(str(DEFAULT_DRAFT / "draft.onnx")))  # draft-upgrade: the fast kernels
    gap = onnx_gap(DEFAULT_DRAFT / "draft.onnx", draft.entry, reference)
    print(f"\n[distill] shipped draft.onnx vs its PyTorch model: max |logit diff| = {gap:.2e}")
    assert gap < 1e-4
    assert draft.provenance["evaluation"]["overall"] >= 0.45


def test_shipped_draft_identity_is_the_default_champions(real_package):
    manifest = json.loads((real_package / "manifest.json").read_text())
    identity = manifest["identity"]
    provenance = read_prebuilt(DEFAULT_DRAFT).provenance
    assert manifest["draft"]["kind"] == "prebuilt" and manifest["draft"]["output_vocab"] == len(
        manifest["draft"]["id_map"]
    )
    for key in ("tokenizer", "special_tokens", "chat_template"):
        assert identity[f"draft_{key}"] == identity[key] == provenance["champion_identity"][key]
    assert (
        provenance["champion_identity"]["champion_weights"] == identity["champion_weights"]
    )  # distilled from this champion


def test_shipped_draft_refuses_another_tokenizer(tmp_path):
    result = run_build_tools(
        "package",
        "--champion",
        str(synth_source(tmp_path)),
        "--draft",
        str(DEFAULT_DRAFT),
        "--out",
        str(tmp_path / "pkg"),
        "--no-golden",
    )
    assert_one_line_error(result, "draft tokenizer differs")
