"""Write a model package: champion shards, tokenizer, chat template, draft ONNX, golden vectors, manifest.

Nothing partial is ever left at --out: the package is assembled in a hidden
sibling folder and renamed into place at the end. An --out that already
holds a different package (or other files) is refused.
Format: docs/PACKAGE_FORMAT.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyodide_app.chat_template import ChatTemplate, TemplateError
from pyodide_app.manifest import (
    SCHEMA,
    SCHEMA_VERSION,
    SHARD_LIMIT_BYTES,
    TENSOR_ALIGNMENT,
    ModelConfig,
    check_manifest,
    sha256_hex,
    tensor_bytes,
    tokenizer_identity,
)
from pyodide_app.package_check import MANIFEST_FILE, file_entry, weights_identity

from .prebuilt_draft import PrebuiltDraft
from .source import ModelSource, SourceError, Tensor, layer_tensor_names

MANIFEST = MANIFEST_FILE
TOKENIZER_FILE = "tokenizer.json"
TEMPLATE_FILE = "chat_template.jinja"
GOLDEN_FILE = "golden.json"
DRAFT_FILE = "draft.onnx"
FALLBACK_FILE = "champion.onnx"  # the compact champion for browsers without WebGPU (all-row logits, MatMulNBits)
# The fast CPU champion: float32 weights, batch-invariant; the file holds no weights (they are dequantised
# from the champion shards at load, so the CPU path downloads what the WebGPU path does).
CPU_CHAMPION_FILE = "champion_cpu.onnx"


def export_cpu_champion(champion: ModelSource, path: Path) -> dict:
    from .export_onnx import export_llama

    return export_llama(champion, champion.config.n_layers, path, all_rows=True, dense=True, weightless=True)


@dataclass
class DraftPlan:
    """What to export as the draft. `source` is the draft model; `n_layers` limits its depth (self:N)."""

    kind: str  # "self" (champion's first layers) | "model" (a separate model) | "prebuilt" (a shipped draft.onnx)
    source: ModelSource | None  # None for "prebuilt"
    n_layers: int
    description: str
    prebuilt: PrebuiltDraft | None = None

    @property
    def origin(self) -> str:
        return str(self.prebuilt.folder) if self.prebuilt is not None else self.source.origin

    def identity(self) -> dict:
        """The draft's tokenizer, special tokens and chat template hashes (see source_identity)."""
        return self.prebuilt.identity if self.prebuilt is not None else source_identity(self.source)


def source_identity(source: ModelSource) -> dict:
    """Hashes a draft must share with its champion: tokenizer, special tokens, chat template."""
    return {**tokenizer_identity(source.tokenizer), "chat_template": sha256_hex(source.chat_template.encode("utf-8"))}


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """GGUF-order shapes ([in, out] for projections) that the shaders expect."""
    d, kv = config.d_model, config.n_kv_heads * config.head_dim
    shapes = {"token_embd.weight": (d, config.vocab_size), "output_norm.weight": (d,)}
    for i in range(config.n_layers):
        shapes.update(
            {
                f"blk.{i}.attn_norm.weight": (d,),
                f"blk.{i}.ffn_norm.weight": (d,),
                f"blk.{i}.attn_q.weight": (d, config.n_heads * config.head_dim),
                f"blk.{i}.attn_k.weight": (d, kv),
                f"blk.{i}.attn_v.weight": (d, kv),
                f"blk.{i}.attn_output.weight": (config.n_heads * config.head_dim, d),
                f"blk.{i}.ffn_gate.weight": (d, config.d_ffn),
                f"blk.{i}.ffn_up.weight": (d, config.d_ffn),
                f"blk.{i}.ffn_down.weight": (config.d_ffn, d),
            }
        )
    if not config.tied_embeddings:
        shapes["output.weight"] = (d, config.vocab_size)
    return shapes


def check_source(source: ModelSource) -> list[str]:
    """Every tensor present, with the right shape and a shader format. Returns names in shard order."""
    config = source.config
    if config.n_heads * config.head_dim != config.d_model or config.n_heads % config.n_kv_heads:
        raise SourceError(
            f"{source.origin}: head layout {config.n_heads}x{config.head_dim} (kv {config.n_kv_heads}) is not supported"
        )
    if config.vocab_size != len(source.tokenizer["tokens"]):
        raise SourceError(
            f"{source.origin}: vocabulary has {len(source.tokenizer['tokens'])} tokens, config says {config.vocab_size}"
        )
    names = layer_tensor_names(config.n_layers) + ([] if config.tied_embeddings else ["output.weight"])
    for name, shape in expected_shapes(config).items():
        tensor = source.require(name)
        if tuple(tensor.shape) != shape:
            raise SourceError(f"{source.origin}: tensor {name} has shape {list(tensor.shape)}, expected {list(shape)}")
        if tensor.format != "f32" and len(shape) == 1:
            raise SourceError(f"{source.origin}: norm {name} must be F32, is {tensor.format}")
    try:
        ChatTemplate.from_jinja(source.chat_template)
    except TemplateError as error:
        raise SourceError(f"{source.origin}: {error}") from None
    return names


def tensor_digest(tensor: Tensor) -> str:
    return hashlib.sha256(tensor.raw_bytes()).hexdigest()


class ShardWriter:
    """Packs tensors into numbered shards of at most SHARD_LIMIT_BYTES, each tensor 256-byte aligned."""

    def __init__(self, folder: Path, prefix: str = "champion"):
        self.folder, self.prefix = folder, prefix
        self.shards: list[str] = []
        self.handle = None
        self.size = 0

    def _open_next(self) -> None:
        self.close()
        name = f"{self.prefix}-{len(self.shards):03d}.bin"
        self.shards.append(name)
        self.handle = open(self.folder / name, "wb")
        self.size = 0

    def add(self, data: bytes) -> list[dict]:
        """Write one tensor; returns its parts (a tensor larger than the space left spans shards)."""
        parts, view = [], memoryview(data)
        while view:
            padding = -self.size % TENSOR_ALIGNMENT
            if (
                self.handle is None
                or self.size + padding >= SHARD_LIMIT_BYTES
                or (
                    self.size and self.size + padding + len(view) > SHARD_LIMIT_BYTES and len(view) <= SHARD_LIMIT_BYTES
                )
            ):
                self._open_next()
                padding = 0
            self.handle.write(b"\0" * padding)
            self.size += padding
            take = min(len(view), SHARD_LIMIT_BYTES - self.size)
            self.handle.write(view[:take])
            parts.append({"shard": self.shards[-1], "offset": self.size, "bytes": take})
            self.size += take
            view = view[take:]
        return parts

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def check_draft_identity(champion: ModelSource, draft: DraftPlan) -> None:
    """A draft must share the champion's tokenizer, special tokens and chat template byte for byte."""
    mine, theirs = source_identity(champion), draft.identity()
    for key in ("tokenizer", "special_tokens", "chat_template"):
        if mine[key] != theirs[key]:
            raise SourceError(
                f"{draft.origin}: draft {key.replace('_', ' ')} differs from the champion's ({champion.origin})"
            )


def prepare_output(out: Path, identity: dict) -> None:
    """Refuse an --out that holds anything but an earlier build of this same package."""
    if not out.exists():
        return
    if not out.is_dir():
        raise SourceError(f"{out}: exists and is not a folder")
    contents = list(out.iterdir())
    if not contents:
        return
    try:
        existing = json.loads((out / MANIFEST).read_text())["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        raise SourceError(f"{out}: folder is not empty and holds no package; choose another --out") from None
    keys = ("tokenizer", "champion_weights", "draft_weights", "chat_template")
    if any(existing.get(k) != identity.get(k) for k in keys):
        raise SourceError(f"{out}: already holds a different package; choose another --out or remove it")


def build_package(
    champion: ModelSource,
    out: Path,
    draft: DraftPlan | None = None,
    export_draft: Callable[[DraftPlan, Path], dict] | None = None,
    golden: Callable[[ModelSource], dict] | None = None,
    export_fallback: Callable[[ModelSource, Path], dict] | None = None,
) -> dict:
    """Write the package to `out` atomically; returns the manifest."""
    out = Path(out)
    names = check_source(champion)
    if draft is not None:
        check_draft_identity(champion, draft)
    if draft is not None and draft.kind == "model":
        check_source(draft.source)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        manifest = _write_package(champion, names, staging, draft, export_draft, golden, export_fallback)
        prepare_output(out, manifest["identity"])
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
        return manifest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_package(champion, names, folder: Path, draft, export_draft, golden, export_fallback=None) -> dict:
    writer = ShardWriter(folder)
    tensors = {}
    try:
        for name in names:
            tensor = champion.tensors[name]
            data = tensor.raw_bytes()
            assert len(data) == tensor_bytes(tensor.format, tensor.shape), name
            tensors[name] = {
                "format": tensor.format,
                "shape": list(tensor.shape),
                "parts": writer.add(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
    finally:
        writer.close()
    (folder / TOKENIZER_FILE).write_text(json.dumps(champion.tokenizer, ensure_ascii=False))
    (folder / TEMPLATE_FILE).write_text(champion.chat_template)
    identity = {**source_identity(champion), "champion_weights": weights_identity(tensors), "draft_weights": None}
    draft_entry = None
    if draft is not None:
        if export_draft is None:
            raise SourceError("a draft was requested but no exporter was given")
        draft_entry = export_draft(draft, folder / DRAFT_FILE)
        draft_entry.update({"kind": draft.kind, "onnx": DRAFT_FILE, "description": draft.description})
        agreement = draft.prebuilt.agreement if draft.prebuilt is not None else None
        if agreement is not None:  # the auto scheduler's prior for the draft's acceptance
            draft_entry["agreement"] = agreement
        later = draft.prebuilt.later_agreement if draft.prebuilt is not None else None
        if later is not None:  # its prior for positions after the first
            draft_entry["later_agreement"] = later
        stop = draft.prebuilt.provenance.get("calibration", {}).get("stop_entropy_bits") if draft.prebuilt else None
        if stop is not None:  # the neural proposer ends a proposal before a draft row more uncertain than this
            draft_entry["stop_entropy_bits"] = stop
        by_entropy = draft.prebuilt.acceptance_by_entropy if draft.prebuilt else None
        if by_entropy is not None:  # auto's neural rounds draft past their k where the draft is sure
            draft_entry["acceptance_by_entropy"] = by_entropy
        identity.update(
            {
                "draft_weights": file_entry(folder / DRAFT_FILE)["sha256"],
                **{f"draft_{key}": value for key, value in draft.identity().items()},
            }
        )
    fallback_entry = cpu_entry = None
    if export_fallback is not None:
        fallback_entry = export_fallback(champion, folder / FALLBACK_FILE)
        fallback_entry["onnx"] = FALLBACK_FILE
        identity["fallback_weights"] = file_entry(folder / FALLBACK_FILE)["sha256"]
        cpu_entry = export_cpu_champion(champion, folder / CPU_CHAMPION_FILE)
        cpu_entry["onnx"] = CPU_CHAMPION_FILE
    manifest = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "source": Path(champion.origin).name,
        "license": champion.license,
        "champion": {"config": champion.config.to_dict(), "tensors": tensors},
        "draft": draft_entry,
        "fallback": fallback_entry,
        "cpu_champion": cpu_entry,
        "tokenizer": TOKENIZER_FILE,
        "chat_template": TEMPLATE_FILE,
        "generation": {
            "bos_id": champion.tokenizer["bos_id"],
            "eos_ids": [champion.tokenizer["eos_id"]],
            "context_limit": champion.config.context_length,
        },
        "identity": identity,
        "golden": None,
        "files": {},
    }
    if golden is not None:
        (folder / GOLDEN_FILE).write_text(json.dumps(golden(champion)))
        manifest["golden"] = GOLDEN_FILE
    for path in sorted(folder.iterdir()):
        manifest["files"][path.name] = file_entry(path)
    check_manifest(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return manifest
