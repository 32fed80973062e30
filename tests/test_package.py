"""Model packages: layout, verify, and every kind of bad input refused with one line and nothing partial."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from build_tools.package import DraftPlan, build_package
from build_tools.prebuilt_draft import read_prebuilt
from build_tools.recipes import DEFAULT_DRAFT
from build_tools.source import SourceError
from build_tools.synth import synth_models, tiny_tokenizer
from pyodide_app.manifest import SHARD_LIMIT_BYTES, TENSOR_ALIGNMENT

from .conftest import run_build_tools
from .model_fixtures import write_gguf, write_hf_folder


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line, no traceback
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def copy_package(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(source, target)
    return target


def test_synth_package_layout(synth_package):
    manifest = json.loads((synth_package / "manifest.json").read_text())
    assert manifest["schema_version"] == 1
    assert manifest["draft"]["kind"] == "model"
    assert set(manifest["files"]) == {p.name for p in synth_package.iterdir()} - {"manifest.json"}
    for tensor in manifest["champion"]["tensors"].values():
        for part in tensor["parts"]:
            assert part["offset"] % TENSOR_ALIGNMENT == 0
    assert run_build_tools("check", str(synth_package)).returncode == 0


def test_shards_respect_the_size_limit_and_alignment(real_package):
    manifest = json.loads((real_package / "manifest.json").read_text())
    shards = [name for name in manifest["files"] if name.startswith("champion-")]
    assert len(shards) >= 3
    assert all(manifest["files"][s]["bytes"] <= SHARD_LIMIT_BYTES for s in shards)
    formats = {t["format"] for t in manifest["champion"]["tensors"].values()}
    assert formats == {"q4_1", "q8_0", "f32"}
    assert manifest["generation"] == {"bos_id": 1, "eos_ids": [2], "context_limit": 8192}
    shipped = read_prebuilt(DEFAULT_DRAFT)  # the distilled draft, as shipped
    assert manifest["draft"]["kind"] == "prebuilt"
    assert manifest["identity"]["draft_weights"] == shipped.provenance["draft_onnx_sha256"]
    assert manifest["draft"]["config"] == shipped.entry["config"]


def test_real_package_verifies_and_any_flipped_shard_byte_is_named(real_package, tmp_path):
    assert run_build_tools("check", str(real_package)).returncode == 0
    broken = copy_package(real_package, tmp_path)
    manifest = json.loads((broken / "manifest.json").read_text())
    for shard in sorted(n for n in manifest["files"] if n.endswith(".bin")):
        path = broken / shard
        original = path.read_bytes()
        data = bytearray(original)
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        assert_one_line_error(run_build_tools("check", str(broken)), shard, "sha256")
        path.write_bytes(original)
    assert run_build_tools("check", str(broken)).returncode == 0


@pytest.mark.parametrize(
    "damage, named",
    [
        ("truncate_shard", "champion-000.bin"),
        ("truncate_onnx", "draft.onnx"),
        ("delete_tokenizer", "tokenizer.json"),
        ("edit_offset", "blk.0.attn_q.weight"),
        ("edit_hash_to_match_corruption", "champion-000.bin"),
        ("edit_identity", "tokenizer"),
        ("edit_draft_identity", "draft"),
        ("bad_json", "manifest.json"),
        ("wrong_schema", "manifest.json"),
        ("edit_id_map_duplicate", "draft.id_map (draft.onnx): id 4 appears more than once"),
        ("edit_id_map_range", "draft.id_map (draft.onnx): id 99999 is outside the vocabulary"),
        ("edit_draft_outputs", "draft graph has no entropy_bits output"),
    ],
)
def test_damaged_packages_fail_verify_with_one_line(synth_package, tmp_path, damage, named):
    pkg = copy_package(synth_package, tmp_path)
    manifest_path = pkg / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if damage == "truncate_shard":
        shard = pkg / "champion-000.bin"
        shard.write_bytes(shard.read_bytes()[:-100])
    elif damage == "truncate_onnx":
        onnx_file = pkg / "draft.onnx"
        onnx_file.write_bytes(onnx_file.read_bytes()[:1000])
    elif damage == "delete_tokenizer":
        (pkg / "tokenizer.json").unlink()
    elif damage == "edit_offset":
        manifest["champion"]["tensors"]["blk.0.attn_q.weight"]["parts"][0]["offset"] += TENSOR_ALIGNMENT
    elif damage == "edit_hash_to_match_corruption":
        shard = pkg / "champion-000.bin"
        data = bytearray(shard.read_bytes())
        data[300] ^= 0xFF
        shard.write_bytes(bytes(data))
        import hashlib

        manifest["files"]["champion-000.bin"]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    elif damage == "edit_identity":
        manifest["identity"]["tokenizer"] = "0" * 64
        manifest["identity"]["draft_tokenizer"] = "0" * 64
    elif damage == "edit_draft_identity":
        manifest["identity"]["draft_tokenizer"] = "f" * 64
    elif damage == "bad_json":
        manifest_path.write_text("{not json")
    elif damage == "wrong_schema":
        manifest["schema_version"] = 99
    elif damage == "edit_draft_outputs":  # a draft exported before the graph reported its row's entropy
        manifest["draft"]["outputs"].remove("entropy_bits")
    elif damage.startswith("edit_id_map"):  # a reduced vocabulary whose ids are not distinct vocabulary ids
        id_map = list(range(manifest["draft"]["output_vocab"]))
        id_map[5 if damage.endswith("duplicate") else 0] = 4 if damage.endswith("duplicate") else 99999
        manifest["draft"]["id_map"] = id_map
    if damage not in ("bad_json",) and damage.startswith(("edit", "wrong")):
        manifest_path.write_text(json.dumps(manifest))
    assert_one_line_error(run_build_tools("check", str(pkg)), named)


def test_truncated_gguf_is_refused_and_nothing_is_written(tmp_path):
    champion, _ = synth_models(1)
    gguf_path = write_gguf(champion, tmp_path / "model.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(gguf_path.read_bytes()[: gguf_path.stat().st_size // 2])
    out = tmp_path / "out"
    assert_one_line_error(run_build_tools("package", "--champion", str(truncated), "--out", str(out)), "truncated.gguf")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_unknown_architecture_is_refused(tmp_path):
    champion, _ = synth_models(1)
    path = write_gguf(champion, tmp_path / "qwen.gguf", architecture="qwen2")
    assert_one_line_error(
        run_build_tools("package", "--champion", str(path), "--out", str(tmp_path / "o")), "qwen2", "llama only"
    )
    folder = write_hf_folder(champion, tmp_path / "hf", model_type="gpt2")
    assert_one_line_error(
        run_build_tools("package", "--champion", str(folder), "--out", str(tmp_path / "o")), "gpt2", "llama only"
    )


def test_missing_tensor_is_named(tmp_path):
    champion, _ = synth_models(1)
    path = write_gguf(champion, tmp_path / "m.gguf", drop="blk.1.ffn_up.weight")
    assert_one_line_error(
        run_build_tools("package", "--champion", str(path), "--out", str(tmp_path / "o")),
        "blk.1.ffn_up.weight",
        "missing",
    )


def test_gguf_source_packages_to_the_same_weights(tmp_path):
    champion, _ = synth_models(1)
    path = write_gguf(champion, tmp_path / "m.gguf")
    out = tmp_path / "pkg"
    result = run_build_tools("package", "--champion", str(path), "--draft", "self:1", "--out", str(out), "--no-golden")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["draft"]["kind"] == "self"
    for name, tensor in champion.tensors.items():
        import hashlib

        assert manifest["champion"]["tensors"][name]["sha256"] == hashlib.sha256(tensor.raw_bytes()).hexdigest()


def test_draft_with_a_different_tokenizer_or_template_is_refused(tmp_path):
    champion, draft = synth_models(2)
    other_tokenizer = dict(tiny_tokenizer())
    other_tokenizer["merges"] = (
        other_tokenizer["merges"][:-2] + other_tokenizer["merges"][-1:] + other_tokenizer["merges"][-2:-1]
    )
    draft_folder = tmp_path / "draft.gguf"
    mismatched = type(draft)(draft.origin, draft.config, other_tokenizer, draft.chat_template, draft.tensors)
    with pytest.raises(SourceError, match="tokenizer"):
        build_package(champion, tmp_path / "o1", DraftPlan("model", mismatched, 1, "x"), lambda p, f: {})
    retemplated = type(draft)(
        draft.origin, draft.config, draft.tokenizer, draft.chat_template.replace("tiny", "small"), draft.tensors
    )
    with pytest.raises(SourceError, match="chat template"):
        build_package(champion, tmp_path / "o2", DraftPlan("model", retemplated, 1, "x"), lambda p, f: {})
    champion_gguf = write_gguf(champion, tmp_path / "c.gguf")
    write_gguf(retemplated, draft_folder)
    result = run_build_tools(
        "package", "--champion", str(champion_gguf), "--draft", str(draft_folder), "--out", str(tmp_path / "o3")
    )
    assert_one_line_error(result, "draft.gguf", "chat template")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()


def test_output_folder_holding_a_different_package_is_refused_untouched(synth_package, tmp_path):
    out = copy_package(synth_package, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = run_build_tools("synth", "--out", str(out), "--seed", "5")
    assert_one_line_error(result, "different package")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # The same package again is fine (rebuild in place), and so is an empty folder.
    assert run_build_tools("synth", "--out", str(out), "--seed", "0").returncode == 0
    (tmp_path / "empty").mkdir()
    assert run_build_tools("synth", "--out", str(tmp_path / "empty"), "--seed", "0").returncode == 0
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("mine")
    assert_one_line_error(run_build_tools("synth", "--out", str(tmp_path / "junk")), "holds no package")


def test_bad_self_draft_spec(tmp_path):
    champion, _ = synth_models(1)
    path = write_gguf(champion, tmp_path / "m.gguf")
    assert_one_line_error(
        run_build_tools("package", "--champion", str(path), "--draft", "self:9", "--out", str(tmp_path / "o")), "self:9"
    )
