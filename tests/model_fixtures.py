"""Writing test models to disk in the formats users bring: GGUF files and Hugging Face folders."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from build_tools.gguf_writer import write_gguf  # noqa: F401 - the tests import it from here
from build_tools.reference import dequantize
from build_tools.source import ModelSource


def unpermute_for_hf(weight: np.ndarray, heads: int) -> np.ndarray:
    """GGUF adjacent-pair q/k rows -> HF rotate_half order (inverse of hf_source.permute_for_adjacent_rope)."""
    out_dim, in_dim = weight.shape
    return weight.reshape(heads, out_dim // heads // 2, 2, in_dim).swapaxes(1, 2).reshape(out_dim, in_dim)


def write_safetensors(arrays: dict[str, np.ndarray], path: Path, dtype: str) -> None:
    header, blobs, offset = {}, [], 0
    for name, value in arrays.items():
        value = np.asarray(value, np.float32)
        blob = (
            ((value.view(np.uint32) + 0x8000) >> 16).astype(np.uint16).tobytes() if dtype == "BF16" else value.tobytes()
        )
        header[name] = {"dtype": dtype, "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def hf_float_weights(source: ModelSource) -> dict[str, np.ndarray]:
    """The model's weights as float32 in Hugging Face names and conventions."""
    c = source.config
    names = {
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    out = {
        "model.embed_tokens.weight": dequantize(source.tensors["token_embd.weight"]),
        "model.norm.weight": dequantize(source.tensors["output_norm.weight"]),
    }
    for i in range(c.n_layers):
        for gguf_name, hf_name in names.items():
            value = dequantize(source.tensors[f"blk.{i}.{gguf_name}.weight"])
            if gguf_name == "attn_q":
                value = unpermute_for_hf(value, c.n_heads)
            elif gguf_name == "attn_k":
                value = unpermute_for_hf(value, c.n_kv_heads)
            out[f"model.layers.{i}.{hf_name}.weight"] = value
    return out


def write_hf_folder(source: ModelSource, folder: Path, dtype: str = "F32", model_type: str = "llama") -> Path:
    c, tok = source.config, source.tokenizer
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": model_type,
        "architectures": ["LlamaForCausalLM"],
        "num_hidden_layers": c.n_layers,
        "hidden_size": c.d_model,
        "intermediate_size": c.d_ffn,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_kv_heads,
        "rope_theta": c.rope_theta,
        "rms_norm_eps": c.rms_eps,
        "max_position_embeddings": c.context_length,
        "tie_word_embeddings": True,
        "bos_token_id": tok["bos_id"],
        "eos_token_id": tok["eos_id"],
        "vocab_size": c.vocab_size,
    }
    (folder / "config.json").write_text(json.dumps(config))
    special = [t for t, kind in zip(tok["tokens"], tok["token_types"]) if kind == 3]
    vocab = {t: i for i, t in enumerate(tok["tokens"])}  # specials included: add_special_tokens keeps their ids
    hf = HFTokenizer(models.BPE(vocab, [tuple(m.split(" ", 1)) for m in tok["merges"]]))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "chat_template": source.chat_template,
                "bos_token": tok["tokens"][tok["bos_id"]],
                "eos_token": tok["tokens"][tok["eos_id"]],
            }
        )
    )
    write_safetensors(hf_float_weights(source), folder / "model.safetensors", dtype)
    return folder
