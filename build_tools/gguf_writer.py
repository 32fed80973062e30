"""Writing a ModelSource as a GGUF file, the way llama.cpp's converter lays it out (metadata + tensors).

Used by the tests (GGUF inputs, some deliberately broken) and by the bench, whose llama.cpp peer needs the
synthetic model as a GGUF file.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .source import ModelSource

GGUF_TYPES = {
    "q4_1": gguf.GGMLQuantizationType.Q4_1,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
    "f32": gguf.GGMLQuantizationType.F32,
}


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
