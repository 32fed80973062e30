"""Model package manifest: schema, model config and identity hashes (standard library only).

The same code validates a package at build time (build_tools check) and in
the browser's worker before anything is uploaded to the GPU. Layout and field
meanings: docs/PACKAGE_FORMAT.md.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

SCHEMA = "spec-chat-package"
SCHEMA_VERSION = 1
SHARD_LIMIT_BYTES = 32 * 1024 * 1024
TENSOR_ALIGNMENT = 256  # bytes; WebGPU's minStorageBufferOffsetAlignment, and a multiple of 4 for u32 loads
FORMATS = {"q4_1": (32, 20), "q8_0": (32, 34), "f32": (1, 4)}  # format -> (block elements, block bytes)


class ManifestError(Exception):
    """A package that must not be used; `where` names the file or field at fault."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # "llama"
    n_layers: int
    d_model: int
    d_ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    context_length: int
    vocab_size: int
    tied_embeddings: bool

    @classmethod
    def from_dict(cls, data: dict, where: str = "config") -> "ModelConfig":
        names = {f.name for f in fields(cls)}
        missing = names - set(data)
        if missing:
            raise ManifestError(where, f"missing fields {sorted(missing)}")
        return cls(**{name: data[name] for name in names})

    def to_dict(self) -> dict:
        return asdict(self)


def tensor_bytes(fmt: str, shape) -> int:
    """Bytes of a tensor: GGUF shape order, shape[0] is the contiguous (block) dimension."""
    block_elements, block_bytes = FORMATS[fmt]
    if shape[0] % block_elements:
        raise ManifestError("tensors", f"{fmt} row length {shape[0]} is not a multiple of {block_elements}")
    count = 1
    for dim in shape:
        count *= dim
    return count // block_elements * block_bytes


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tokenizer_identity(tokenizer: dict) -> dict:
    """Hashes that two models sharing a tokenizer must agree on."""
    special = [[i, tokenizer["tokens"][i]] for i, kind in enumerate(tokenizer["token_types"]) if kind == 3]
    core = {k: tokenizer[k] for k in ("model", "pre_tokenizer", "tokens", "merges", "token_types")}
    return {
        "tokenizer": sha256_hex(canonical_json(core)),
        "special_tokens": sha256_hex(
            canonical_json({"special": special, "bos_id": tokenizer["bos_id"], "eos_id": tokenizer["eos_id"]})
        ),
    }


# The draft graph's outputs the neural proposer reads (proposers/neural.py DraftStep).
DRAFT_OUTPUTS = ("probs", "token", "entropy_bits")


def check_manifest(manifest: dict) -> None:
    """Schema checks that need no file access. Raises ManifestError naming the field."""
    if manifest.get("schema") != SCHEMA:
        raise ManifestError("manifest.json", f"not a {SCHEMA} manifest")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise ManifestError(
            "manifest.json", f"schema_version {manifest.get('schema_version')!r}, this build reads {SCHEMA_VERSION}"
        )
    for key in ("champion", "files", "identity", "generation", "tokenizer", "chat_template"):
        if key not in manifest:
            raise ManifestError("manifest.json", f"missing {key!r}")
    config = ModelConfig.from_dict(manifest["champion"].get("config", {}), "manifest.json champion.config")
    if config.architecture != "llama":
        raise ManifestError("manifest.json", f"architecture {config.architecture!r} is not supported (llama only)")
    files = manifest["files"]
    for name, tensor in manifest["champion"].get("tensors", {}).items():
        check_tensor_entry(f"manifest.json tensor {name}", tensor, files)
    identity = manifest["identity"]
    draft = manifest.get("draft")
    if draft is not None:
        missing = [name for name in DRAFT_OUTPUTS if name not in draft.get("outputs", ())]
        if missing:
            raise ManifestError(
                draft.get("onnx", "draft"),
                f"the draft graph has no {', '.join(missing)} output (made by an older exporter: rebuild the "
                "package; a prebuilt draft folder first with `build_tools draft-upgrade`)",
            )
        if draft.get("id_map") is not None:
            check_id_map(
                draft["id_map"],
                draft.get("output_vocab"),
                config.vocab_size,
                f"manifest.json draft.id_map ({draft.get('onnx', 'draft')})",
            )
        for field in ("tokenizer", "special_tokens", "chat_template"):
            if identity.get(f"draft_{field}") != identity.get(field):
                raise ManifestError(
                    draft.get("onnx", "draft"),
                    f"draft {field.replace('_', ' ')} differs from the champion's (hash "
                    f"{str(identity.get(f'draft_{field}'))[:12]} vs {str(identity.get(field))[:12]})",
                )


def check_id_map(id_map, output_vocab, vocab_size: int, where: str) -> None:
    """A reduced draft vocabulary: output index j is token id_map[j]. The ids must be distinct vocabulary
    ids (a duplicate would give one token two q entries, and the GPU and CPU verifiers would each read a
    different one), one per output."""
    if not isinstance(id_map, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in id_map):
        raise ManifestError(where, "must be a list of token ids")
    if output_vocab is not None and len(id_map) != output_vocab:
        raise ManifestError(where, f"has {len(id_map)} ids for an output vocabulary of {output_vocab}")
    bad = next((t for t in id_map if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise ManifestError(where, f"id {bad} is outside the vocabulary (0..{vocab_size - 1})")
    if len(set(id_map)) != len(id_map):
        seen: set[int] = set()
        duplicate = next(t for t in id_map if t in seen or seen.add(t))
        raise ManifestError(where, f"id {duplicate} appears more than once")


def read_tensor_bytes(folder, entry: dict) -> bytes:
    """A tensor's bytes from a package folder: its parts (byte ranges of shards) concatenated."""
    chunks = []
    for part in entry["parts"]:
        with open(f"{folder}/{part['shard']}", "rb") as handle:
            handle.seek(part["offset"])
            chunks.append(handle.read(part["bytes"]))
    return b"".join(chunks)


def check_tensor_entry(where: str, tensor: dict, files: dict) -> None:
    """A tensor is the concatenation of its parts, each a byte range of one shard."""
    if tensor.get("format") not in FORMATS:
        raise ManifestError(where, f"unknown format {tensor.get('format')!r}")
    total = 0
    for part in tensor.get("parts", ()):
        shard = part.get("shard")
        if shard not in files:
            raise ManifestError(where, f"shard {shard!r} is not listed in files")
        if part["offset"] % TENSOR_ALIGNMENT:
            raise ManifestError(where, f"offset {part['offset']} in {shard} is not {TENSOR_ALIGNMENT}-byte aligned")
        if part["offset"] + part["bytes"] > files[shard]["bytes"]:
            raise ManifestError(where, f"extends past the end of {shard}")
        total += part["bytes"]
    if total != tensor_bytes(tensor["format"], tensor["shape"]):
        raise ManifestError(
            where, f"parts hold {total} bytes; format and shape need {tensor_bytes(tensor['format'], tensor['shape'])}"
        )
