"""Writing test models to disk in the formats users bring: GGUF files and Hugging Face folders."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import gguf
import numpy as np
from tokenizers import AddedToken, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

from build_tools.reference import dequantize
from build_tools.source import ModelSource

GGUF_TYPES = {"q4_1": gguf.GGMLQuantizationType.Q4_1, "q8_0": gguf.GGMLQuantizationType.Q8_0, "f32": gguf.GGMLQuantizationType.F32}


def write_gguf(source: ModelSource, path: Path, architecture: str = "llama", drop: str | None = None) -> Path:
    """A GGUF file like llama.cpp's converter writes (metadata + tensors), optionally broken."""
    c, tok = source.config, source.tokenizer
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(c.n_layers)
    writer.add_context_length(c.context_length)
    writer.add_embedding_length(c.d_model)
    writer.add_feed_forward_length(c.d_ffn)
    writer.add_head_count(c.n_heads)
    writer.add_head_count_kv(c.n_kv_heads)
    writer.add_rope_freq_base(c.rope_theta)
    writer.add_layer_norm_rms_eps(c.rms_eps)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(tok["pre_tokenizer"])
    writer.add_token_list(tok["tokens"])
    writer.add_token_merges(tok["merges"])
    writer.add_token_types(tok["token_types"])
    writer.add_bos_token_id(tok["bos_id"])
    writer.add_eos_token_id(tok["eos_id"])
    writer.add_chat_template(source.chat_template)
    for name, tensor in source.tensors.items():
        if name == drop:
            continue
        data = np.asarray(tensor.data)
        if tensor.format == "f32":
            writer.add_tensor(name, data.astype(np.float32).reshape(tuple(reversed(tensor.shape))))
        else:
            rows = int(np.prod(tensor.shape[1:]))  # gguf takes quantized data as [rows, bytes per row]
            writer.add_tensor(name, data.reshape(rows, -1), raw_dtype=GGUF_TYPES[tensor.format])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def unpermute_for_hf(weight: np.ndarray, heads: int) -> np.ndarray:
    """GGUF adjacent-pair q/k rows -> HF rotate_half order (inverse of hf_source.permute_for_adjacent_rope)."""
    out_dim, in_dim = weight.shape
    return weight.reshape(heads, out_dim // heads // 2, 2, in_dim).swapaxes(1, 2).reshape(out_dim, in_dim)


def write_safetensors(arrays: dict[str, np.ndarray], path: Path, dtype: str) -> None:
    header, blobs, offset = {}, [], 0
    for name, value in arrays.items():
        value = np.asarray(value, np.float32)
        blob = ((value.view(np.uint32) + 0x8000) >> 16).astype(np.uint16).tobytes() if dtype == "BF16" else value.tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def hf_float_weights(source: ModelSource) -> dict[str, np.ndarray]:
    """The model's weights as float32 in Hugging Face names and conventions."""
    c = source.config
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    out = {"model.embed_tokens.weight": dequantize(source.tensors["token_embd.weight"]),
           "model.norm.weight": dequantize(source.tensors["output_norm.weight"])}
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
    config = {"model_type": model_type, "architectures": ["LlamaForCausalLM"], "num_hidden_layers": c.n_layers,
              "hidden_size": c.d_model, "intermediate_size": c.d_ffn, "num_attention_heads": c.n_heads,
              "num_key_value_heads": c.n_kv_heads, "rope_theta": c.rope_theta, "rms_norm_eps": c.rms_eps,
              "max_position_embeddings": c.context_length, "tie_word_embeddings": True,
              "bos_token_id": tok["bos_id"], "eos_token_id": tok["eos_id"], "vocab_size": c.vocab_size}
    (folder / "config.json").write_text(json.dumps(config))
    special = [t for t, kind in zip(tok["tokens"], tok["token_types"]) if kind == 3]
    vocab = {t: i for i, t in enumerate(tok["tokens"])}  # specials included: add_special_tokens keeps their ids
    hf = HFTokenizer(models.BPE(vocab, [tuple(m.split(" ", 1)) for m in tok["merges"]]))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": source.chat_template,
        "bos_token": tok["tokens"][tok["bos_id"]], "eos_token": tok["tokens"][tok["eos_id"]],
    }))
    write_safetensors(hf_float_weights(source), folder / "model.safetensors", dtype)
    return folder
