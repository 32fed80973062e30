"""The distillation pipeline on the synthetic model, tiny configuration (seconds): data generation is
resumable and incremental, the evaluation prompts are disjoint from training, the exported ONNX
draft computes what the trained PyTorch model computes, and the provenance says what was done."""

from __future__ import annotations

import itertools
import json

from build_tools.distill_prompts import EVAL_TOPICS, TRAIN_TOPICS, evaluation_prompts, training_prompts

from .conftest import run_build_tools


def test_evaluation_prompts_are_fixed_and_never_trained_on():
    held_out = evaluation_prompts()
    assert held_out == evaluation_prompts()  # reproducible
    assert not set(EVAL_TOPICS) & set(TRAIN_TOPICS)
    training = {p["prompt"] for p in itertools.islice(training_prompts(0), 5000)}
    assert not training & {p["prompt"] for p in held_out}
    assert {p["task"] for p in held_out} == {p["task"] for p in itertools.islice(training_prompts(0), 20)}


def test_distill_tiny_end_to_end_and_resumable(synth_package, tmp_path):
    out = tmp_path / "distill"
    common = ["distill", "--champion", str(synth_package), "--out", str(out), "--minutes", "0.05", "--shape", "tiny",
              "--max-tokens", "16", "--eval-per-task", "1"]
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
