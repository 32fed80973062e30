"""Reading a Hugging Face Llama folder (config.json, *.safetensors, tokenizer.json) into a ModelSource.

Weights are converted to the GGUF conventions the shaders read: GGUF tensor
names, [in, out] shapes, q/k rows permuted so RoPE rotates adjacent pairs
(HF's rotate_half pairs x[i] with x[i + head_dim/2]), projections and the
embedding quantized to Q8_0, norms kept as F32.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from pyodide_app.manifest import ModelConfig
from pyodide_app.tokenizer import TOKEN_TYPE_CONTROL

from .source import ModelSource, SourceError, Tensor, quantize

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
HF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """float32 arrays from a .safetensors file (F32, F16 and BF16; BF16 needs no torch)."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise SourceError(f"{path}: truncated safetensors file")
    (header_len,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8 : 8 + header_len])
    except ValueError:
        raise SourceError(f"{path}: unreadable safetensors header") from None
    data = memoryview(raw)[8 + header_len :]
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise SourceError(f"{path}: tensor {name} has dtype {info['dtype']} (need F32, F16 or BF16)")
        start, end = info["data_offsets"]
        if end > len(data):
            raise SourceError(f"{path}: tensor {name} extends past the end of the file (truncated)")
        values = np.frombuffer(data[start:end], dtype=dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            values = (values.astype(np.uint32) << 16).view(np.float32)
        arrays[name] = values.astype(np.float32)
    return arrays


def permute_for_adjacent_rope(weight: np.ndarray, heads: int) -> np.ndarray:
    """HF q/k rows [heads*hd, in] (rotate_half pairs) -> GGUF order (adjacent pairs)."""
    out_dim, in_dim = weight.shape
    return weight.reshape(heads, 2, out_dim // heads // 2, in_dim).swapaxes(1, 2).reshape(out_dim, in_dim)


def tokenizer_from_hf(path: Path) -> dict:
    data = json.loads(path.read_text())
    model = data.get("model", {})
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise SourceError(f"{path}: tokenizer model must be byte-level BPE")
    vocab = dict(model["vocab"])
    for added in data.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    tokens = [None] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    if any(t is None for t in tokens):
        raise SourceError(f"{path}: vocabulary ids are not contiguous")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    special = {a["id"] for a in data.get("added_tokens", []) if a.get("special")}
    pre = data.get("pre_tokenizer") or {}
    kinds = [p.get("type") for p in pre.get("pretokenizers", [pre])]
    if kinds == ["Digits", "ByteLevel"] and pre["pretokenizers"][0].get("individual_digits"):
        pre_name = "smollm"
    elif kinds == ["ByteLevel"]:
        pre_name = "gpt2"
    else:
        raise SourceError(f"{path}: pre-tokenizer {kinds} is not supported (need ByteLevel, optionally after Digits)")
    return {
        "model": "byte_level_bpe",
        "pre_tokenizer": pre_name,
        "tokens": tokens,
        "merges": merges,
        "token_types": [TOKEN_TYPE_CONTROL if i in special else 1 for i in range(len(tokens))],
    }


def read_hf_folder(folder: Path) -> ModelSource:
    folder = Path(folder)
    for required in ("config.json", "tokenizer.json"):
        if not (folder / required).is_file():
            raise SourceError(
                f"{folder}: {required} is missing (a Hugging Face folder needs config.json, *.safetensors, "
                "tokenizer.json)"
            )
    hf = json.loads((folder / "config.json").read_text())
    if hf.get("model_type") != "llama":
        raise SourceError(f"{folder}/config.json: model_type {hf.get('model_type')!r} is not supported (llama only)")
    tokenizer = tokenizer_from_hf(folder / "tokenizer.json")
    extras = {}
    if (folder / "tokenizer_config.json").is_file():
        extras = json.loads((folder / "tokenizer_config.json").read_text())
    template = extras.get("chat_template")
    if not isinstance(template, str):
        raise SourceError(f"{folder}: no chat_template in tokenizer_config.json")
    ids = {t: i for i, t in enumerate(tokenizer["tokens"])}
    tokenizer["bos_id"] = ids.get(extras.get("bos_token"), hf.get("bos_token_id"))
    tokenizer["eos_id"] = ids.get(extras.get("eos_token"), hf.get("eos_token_id"))
    heads, kv_heads = hf["num_attention_heads"], hf.get("num_key_value_heads", hf["num_attention_heads"])
    config = ModelConfig(
        architecture="llama",
        n_layers=hf["num_hidden_layers"],
        d_model=hf["hidden_size"],
        d_ffn=hf["intermediate_size"],
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=hf.get("head_dim", hf["hidden_size"] // heads),
        rope_theta=float(hf.get("rope_theta", 10000.0)),
        rms_eps=float(hf.get("rms_norm_eps", 1e-5)),
        context_length=hf.get("max_position_embeddings", 2048),
        vocab_size=len(tokenizer["tokens"]),
        tied_embeddings=bool(hf.get("tie_word_embeddings", False)),
    )
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise SourceError(f"{folder}: no *.safetensors files")
    weights = {}
    for path in files:
        weights.update(read_safetensors(path))
    return ModelSource(str(folder), config, tokenizer, template, convert_weights(weights, config, folder))


def convert_weights(weights: dict[str, np.ndarray], config: ModelConfig, origin) -> dict[str, Tensor]:
    def take(name: str) -> np.ndarray:
        if name not in weights:
            raise SourceError(f"{origin}: tensor {name!r} is missing")
        return weights[name]

    tensors = {
        "token_embd.weight": quantize(take("model.embed_tokens.weight"), "q8_0"),
        "output_norm.weight": Tensor("f32", (config.d_model,), take("model.norm.weight")),
    }
    if not config.tied_embeddings:
        tensors["output.weight"] = quantize(take("lm_head.weight"), "q8_0")
    for i in range(config.n_layers):
        for hf_name, gguf_name in HF_NAMES.items():
            value = take(f"model.layers.{i}.{hf_name}.weight")
            if gguf_name.endswith("norm"):
                tensors[f"blk.{i}.{gguf_name}.weight"] = Tensor("f32", value.shape, value)
                continue
            if gguf_name == "attn_q":
                value = permute_for_adjacent_rope(value, config.n_heads)
            elif gguf_name == "attn_k":
                value = permute_for_adjacent_rope(value, config.n_kv_heads)
            tensors[f"blk.{i}.{gguf_name}.weight"] = quantize(value, "q8_0")
    return tensors
