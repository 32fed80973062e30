"""numpy reference forward (real model), ONNX draft vs reference (onnxruntime native and web),
Hugging Face folder conversion, golden vectors, the tokenize CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from build_tools.hf_source import read_hf_folder
from build_tools.reference import ReferenceModel, greedy_generate, read_champion
from build_tools.synth import synth_models
from pyodide_app.chat_template import ChatTemplate
from pyodide_app.sampling import categorical_from_uniform
from pyodide_app.tokenizer import Tokenizer

from .conftest import ROOT, run_build_tools, run_node
from .model_fixtures import hf_float_weights, write_hf_folder

ORT_WEB_RUNNER = ROOT / "tests" / "ort_web_runner.mjs"


def package_text_tools(folder: Path):
    manifest = json.loads((folder / "manifest.json").read_text())
    tokenizer = Tokenizer.from_json((folder / manifest["tokenizer"]).read_text())
    template = ChatTemplate.from_jinja((folder / manifest["chat_template"]).read_text())
    return manifest, tokenizer, template


@pytest.fixture(scope="module")
def real_reference(real_package):
    config, tensors = read_champion(real_package)
    return ReferenceModel(config, tensors), tensors


def test_real_model_says_paris(real_package, real_reference):
    model, _ = real_reference
    manifest, tokenizer, template = package_text_tools(real_package)
    prompt = tokenizer.encode(template.render([{"role": "user", "content": "What is the capital of France?"}]))
    answer = tokenizer.decode(greedy_generate(model, prompt, 24, eos_ids=set(manifest["generation"]["eos_ids"])))
    print(f"\n[reference] {answer!r}")
    assert "Paris" in answer
    golden = json.loads((real_package / manifest["golden"]).read_text())
    assert len(golden["cases"]) == 3 and "Paris" in golden["cases"][0]["text"]
    assert golden["cases"][0]["prompt_ids"] == prompt


def test_scoring_t_tokens_at_once_agrees_with_t_single_calls(real_package, real_reference):
    model, _ = real_reference
    _, tokenizer, template = package_text_tools(real_package)
    tokens = tokenizer.encode(template.render([{"role": "user", "content": "Count to five: 1, 2, 3"}]))
    batch = model.forward(tokens, model.new_cache(len(tokens)), 0)
    cache = model.new_cache(len(tokens))
    singles = np.stack([model.forward([t], cache, i)[0] for i, t in enumerate(tokens)])
    difference = float(np.abs(batch - singles).max())
    print(f"\n[reference] batched vs single-token logits over {len(tokens)} positions: max |diff| = {difference:.2e}")
    assert difference < 1e-3
    assert (batch.argmax(-1) == singles.argmax(-1)).mean() > 0.97


def draft_session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def run_draft(session, tokens, past, temperature, uniform):
    feeds = {
        "input_ids": np.array([tokens], np.int64),
        "temperature": np.array([temperature], np.float32),
        "uniform": np.array([uniform], np.float32),
        **past,
    }
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(None, feeds)))
    present = {n.replace("present", "past"): v for n, v in out.items() if n.startswith("present")}
    return out, present


def empty_past(config: dict) -> dict:
    shape = (1, config["n_kv_heads"], 0, config["head_dim"])
    return {
        f"past_{kind}_{i}": np.zeros(shape, np.float32) for i in range(config["n_layers"]) for kind in ("key", "value")
    }


def compare_draft_to_reference(
    session, reference: ReferenceModel, config: dict, prompt: list[int], steps: int
) -> float:
    """Prefill + `steps` single-token calls; returns the max |logit diff| and checks processing/sampling."""
    cache = reference.new_cache(len(prompt) + steps + 1)
    expected = reference.forward(prompt, cache, 0)[-1]
    out, past = run_draft(session, prompt, empty_past(config), 0.8, 0.37)
    worst = float(np.abs(out["logits"][0] - expected).max())
    position = len(prompt)
    for _ in range(steps):
        probs = out["probs"][0].astype(np.float64)
        scaled = out["logits"][0].astype(np.float64) / 0.8
        softmax = np.exp(scaled - scaled.max())
        # q is softmax on the 2^-24 grid (export_onnx.add_sampler): the argmax holds the floor shortfall
        assert np.abs(probs - softmax / softmax.sum()).max() <= (len(probs) + 2) * 2.0**-24
        assert int(out["token"][0]) == categorical_from_uniform(list(probs), float(np.float32(0.37)))  # exactly
        token = int(np.argmax(expected))
        greedy, _ = run_draft(session, [token], past, 0.0, 0.5)
        assert int(greedy["token"][0]) == int(np.argmax(greedy["logits"][0]))
        assert greedy["probs"][0][int(greedy["token"][0])] == 1.0
        out, past = run_draft(session, [token], past, 0.8, 0.37)
        expected = reference.forward([token], cache, position)[-1]
        worst = max(worst, float(np.abs(out["logits"][0] - expected).max()))
        position += 1
    return worst


def test_synth_draft_onnx_matches_the_reference(synth_package):
    manifest = json.loads((synth_package / "manifest.json").read_text())
    _, draft = synth_models(0)
    reference = ReferenceModel(draft.config, draft.tensors)
    diff = compare_draft_to_reference(
        draft_session(synth_package / "draft.onnx"), reference, manifest["draft"]["config"], [1, 70, 80, 90, 33], 6
    )
    print(f"\n[onnx] synthetic draft vs numpy reference: max |logit diff| = {diff:.2e}")
    assert diff < 1e-4


def test_real_self_draft_onnx_matches_the_reference(real_package, real_reference, tmp_path):
    """An early-exit draft of SmolLM2 (self:6, `package --draft self:6`) exported and run on onnxruntime."""
    from build_tools.distill import champion_source
    from build_tools.export_onnx import export_llama
    from pyodide_app.manifest import ModelConfig

    _, tensors = real_reference
    manifest, tokenizer, template = package_text_tools(real_package)
    config = export_llama(champion_source(real_package)[0], 6, tmp_path / "self6.onnx")["config"]
    reference = ReferenceModel(ModelConfig.from_dict(manifest["champion"]["config"]), tensors, n_layers=6)
    prompt = tokenizer.encode(template.render([{"role": "user", "content": "Name three colors."}]))
    diff = compare_draft_to_reference(draft_session(tmp_path / "self6.onnx"), reference, config, prompt, 4)
    print(f"\n[onnx] SmolLM2 self:6 draft vs numpy reference: max |logit diff| = {diff:.2e}")
    assert diff < 2e-3


def run_in_onnxruntime_web(
    model: Path, feeds: dict, runs: list[dict], outputs: list[str], outputs_once=()
) -> list[dict]:
    """tests/ort_web_runner.mjs: the graph under onnxruntime-web 1.30 (wasm backend, Node), once per run."""

    def spec(value: np.ndarray) -> dict:
        kind = "int64" if value.dtype == np.int64 else "float32"
        return {"type": kind, "dims": list(value.shape), "data": value.reshape(-1).tolist()}

    request = {
        "model": str(model),
        "feeds": {name: spec(value) for name, value in feeds.items()},
        "runs": runs,
        "outputs": outputs,
        "outputs_once": list(outputs_once),
    }
    return run_node([str(ORT_WEB_RUNNER)], request, timeout=600)


def test_draft_onnx_runs_in_onnxruntime_web(synth_package):
    """The same graph under onnxruntime-web 1.30 (wasm backend, under Node) gives the same outputs."""
    manifest = json.loads((synth_package / "manifest.json").read_text())
    config = manifest["draft"]["config"]
    session = draft_session(synth_package / "draft.onnx")
    tokens = [1, 70, 80, 90]
    native, _ = run_draft(session, tokens, empty_past(config), 0.9, 0.61)
    feeds = {"input_ids": np.array([tokens], np.int64), **empty_past(config)}
    web = run_in_onnxruntime_web(
        synth_package / "draft.onnx", feeds, [{"temperature": 0.9, "uniform": 0.61}], ["logits", "probs", "token"]
    )[0]
    diff = float(np.abs(np.array(web["logits"]) - native["logits"][0]).max())
    print(f"\n[onnx] onnxruntime-web (wasm) vs onnxruntime native: max |logit diff| = {diff:.2e}")
    assert diff < 1e-4
    assert web["token"] == [int(native["token"][0])]


def rotate_half_forward(weights: dict[str, np.ndarray], config, tokens: list[int]) -> np.ndarray:
    """Independent float forward in Hugging Face conventions (rotate_half RoPE), no cache."""
    c = config
    T, hd = len(tokens), c.head_dim
    x = weights["model.embed_tokens.weight"][tokens]
    inv = c.rope_theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1))[:, None], np.sin(np.concatenate([ang, ang], -1))[:, None]

    def rope(v):
        rotated = np.concatenate([-v[..., hd // 2 :], v[..., : hd // 2]], -1)
        return v * cos + rotated * sin

    def norm(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + c.rms_eps) * w

    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        h = norm(x, weights[p + "input_layernorm.weight"])
        q = rope((h @ weights[p + "self_attn.q_proj.weight"].T).reshape(T, c.n_heads, hd))
        k = rope((h @ weights[p + "self_attn.k_proj.weight"].T).reshape(T, c.n_kv_heads, hd))
        v = (h @ weights[p + "self_attn.v_proj.weight"].T).reshape(T, c.n_kv_heads, hd)
        k, v = np.repeat(k, c.n_heads // c.n_kv_heads, 1), np.repeat(v, c.n_heads // c.n_kv_heads, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + np.triu(np.full((T, T), -np.inf), 1)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", a, v).reshape(T, -1) @ weights[p + "self_attn.o_proj.weight"].T
        h = norm(x, weights[p + "post_attention_layernorm.weight"])
        g = h @ weights[p + "mlp.gate_proj.weight"].T
        x = (
            x
            + ((g / (1 + np.exp(-g))) * (h @ weights[p + "mlp.up_proj.weight"].T))
            @ weights[p + "mlp.down_proj.weight"].T
        )
    return norm(x, weights["model.norm.weight"]) @ weights["model.embed_tokens.weight"].T


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_hugging_face_folder_is_converted_to_gguf_conventions(tmp_path, dtype):
    champion, _ = synth_models(3)
    folder = write_hf_folder(champion, tmp_path / "hf", dtype)
    source = read_hf_folder(folder)
    assert source.tokenizer == champion.tokenizer and source.chat_template == champion.chat_template
    tokens = [1, 60, 61, 62, 63, 64, 65, 66]
    ours = ReferenceModel(source.config, source.tensors).forward(
        tokens, ReferenceModel(source.config, source.tensors).new_cache(8), 0
    )
    hf = rotate_half_forward(hf_float_weights(champion), champion.config, tokens)
    scale = float(np.abs(hf).max())
    error = float(np.abs(ours - hf).max()) / scale
    print(f"\n[hf {dtype}] converted package vs rotate_half float forward: max |diff| / max |logit| = {error:.3f}")
    assert error < 0.06  # Q8_0 (and BF16) rounding only
    assert (ours.argmax(-1) == hf.argmax(-1)).mean() >= 0.75
    result = run_build_tools(
        "package", "--champion", str(folder), "--draft", "self:1", "--out", str(tmp_path / "pkg"), "--no-golden"
    )
    assert result.returncode == 0, result.stderr
    assert run_build_tools("check", str(tmp_path / "pkg")).returncode == 0


def test_without_the_q_k_permutation_the_hf_model_is_wrong():
    """Negative control for the test above: skipping the permutation must be detected."""
    champion, _ = synth_models(3)
    weights = hf_float_weights(champion)
    tokens = [1, 60, 61, 62, 63, 64, 65, 66]
    right = rotate_half_forward(weights, champion.config, tokens)
    wrong_model = ReferenceModel(champion.config, champion.tensors)
    from build_tools.source import quantize

    broken = dict(champion.tensors)
    for i in range(champion.config.n_layers):
        for part in ("q_proj", "k_proj"):
            broken[f"blk.{i}.attn_{part[0]}.weight"] = quantize(
                weights[f"model.layers.{i}.self_attn.{part}.weight"], "q8_0"
            )
    wrong_model = ReferenceModel(champion.config, broken)
    wrong = wrong_model.forward(tokens, wrong_model.new_cache(8), 0)
    assert float(np.abs(wrong - right).max()) / float(np.abs(right).max()) > 0.1


def test_tokenize_cli_matches_the_library(synth_package):
    _, tokenizer, template = package_text_tools(synth_package)
    texts = ["hello world", "the capital of france is paris. 123", "<|im_start|>user"]
    result = run_build_tools("tokenize", "--model", str(synth_package), stdin="\n".join(texts) + "\n")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [tokenizer.encode(t) for t in texts]
    chats = [
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    ]
    result = run_build_tools(
        "tokenize", "--model", str(synth_package), "--chat", stdin="\n".join(json.dumps(c) for c in chats) + "\n"
    )
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        tokenizer.encode(template.render(c)) for c in chats
    ]
    bad = run_build_tools("tokenize", "--model", str(synth_package), "--chat", stdin="not json\n")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == [
        "error: stdin line 1: not a JSON list of messages"
    ]


def test_chat_template_default_system_prompt_rule(real_package):
    _, _, template = package_text_tools(real_package)
    assert template.render([{"role": "user", "content": "hi"}]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert template.render(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}], add_generation_prompt=False
    ) == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu<|im_end|>\n")


def test_golden_vectors_reproduce(synth_package):
    manifest = json.loads((synth_package / "manifest.json").read_text())
    golden = json.loads((synth_package / manifest["golden"]).read_text())
    config, tensors = read_champion(synth_package)
    model = ReferenceModel(config, tensors)
    for case in golden["cases"]:
        assert (
            greedy_generate(model, case["prompt_ids"], len(case["greedy"]), eos_ids={2})[: len(case["greedy"])]
            == case["greedy"]
        )


def matmul_bits(model) -> list[int]:
    """The `bits` of every MatMulNBits node left in a graph."""
    import onnx

    return [
        onnx.helper.get_attribute_value(a)
        for n in model.graph.node
        if n.op_type == "MatMulNBits"
        for a in n.attribute
        if a.name == "bits"
    ]


def test_draft_graphs_unpack_q8_projections_whose_codes_are_their_own(tmp_path):
    """A draft graph's Q8_0 head (reduced vocabulary: its own codes) becomes a MatMul over weights folded at load
    and computes the packed graph's logits; a tied head shares the embedding's codes and stays packed; the rewrite
    is idempotent. Fails if the unpacked weights drop the zero point or the scales' layout (logits differ by O(1)),
    or if shared codes are unpacked (the tied head's MatMulNBits disappears)."""
    import onnx

    from build_tools.export_onnx import LlamaExporter, export_llama, unpack_q8_matmuls

    _, draft = synth_models(0)
    id_map = np.array([2, 5, 60, 61, 62, 63, 64, 300, 301, 302], np.int64)
    packed = LlamaExporter(draft, draft.config.n_layers, id_map).build()
    assert 8 in matmul_bits(packed)
    onnx.save(packed, str(tmp_path / "packed.onnx"))
    entry = export_llama(draft, draft.config.n_layers, tmp_path / "unpacked.onnx", id_map)
    unpacked = onnx.load(str(tmp_path / "unpacked.onnx"))
    assert 8 not in matmul_bits(unpacked)
    again = unpack_q8_matmuls(onnx.load(str(tmp_path / "unpacked.onnx")))
    assert again.SerializeToString() == unpacked.SerializeToString()
    for temperature, uniform in ((0.0, 0.5), (1.0, 0.3)):
        outs = [
            run_draft(
                draft_session(tmp_path / name), [1, 70, 80, 9], empty_past(entry["config"]), temperature, uniform
            )[0]
            for name in ("packed.onnx", "unpacked.onnx")
        ]
        assert np.abs(outs[0]["logits"] - outs[1]["logits"]).max() < 1e-5
    tied = LlamaExporter(draft, draft.config.n_layers).build()
    assert matmul_bits(unpack_q8_matmuls(tied)).count(8) == matmul_bits(tied).count(8) == 1


def test_reduced_output_vocabulary_maps_tokens_back_to_ids(tmp_path):
    from build_tools.export_onnx import export_llama

    _, draft = synth_models(0)
    id_map = np.array([2, 5, 60, 61, 62, 63, 64, 300, 301, 302], np.int64)
    entry = export_llama(draft, draft.config.n_layers, tmp_path / "reduced.onnx", id_map)
    assert entry["output_vocab"] == len(id_map) and entry["id_map"] == id_map.tolist()
    session = draft_session(tmp_path / "reduced.onnx")
    reference = ReferenceModel(draft.config, draft.tensors)
    expected = reference.forward([1, 70, 80], reference.new_cache(4), 0)[-1][id_map]
    for temperature, uniform in ((0.0, 0.5), (1.0, 0.05), (1.0, 0.95)):
        out, _ = run_draft(session, [1, 70, 80], empty_past(entry["config"]), temperature, uniform)
        assert np.abs(out["logits"][0] - expected).max() < 1e-4
        assert out["probs"].shape == (1, len(id_map))
        index = (
            int(np.argmax(expected)) if temperature == 0 else categorical_from_uniform(list(out["probs"][0]), uniform)
        )
        assert int(out["token"][0]) == int(id_map[index])


def test_real_fallback_champion_onnx_matches_the_reference(real_package, real_reference):
    """champion.onnx (browsers without WebGPU): all-row logits vs numpy for a whole chat prompt."""
    model, _ = real_reference
    manifest, tokenizer, template = package_text_tools(real_package)
    prompt = tokenizer.encode(template.render([{"role": "user", "content": "What is the capital of France?"}]))
    session = draft_session(real_package / manifest["fallback"]["onnx"])
    out, _ = run_draft(session, prompt, empty_past(manifest["fallback"]["config"]), 0.0, 1.0)
    expected = model.forward(prompt, model.new_cache(len(prompt)), 0)
    diff = float(np.abs(out["all_logits"][0] - expected).max())
    print(f"\n[onnx] SmolLM2 champion.onnx vs numpy reference over {len(prompt)} rows: max |logit diff| = {diff:.2e}")
    assert diff < 2e-3
    assert (out["all_logits"][0].argmax(-1) == expected.argmax(-1)).all()
