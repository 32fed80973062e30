"""Check a model package on disk, and read its tensors back.

verify: schema, every file's size and sha256, the identity block recomputed
from the contents, champion/draft identity agreement. The first problem is
raised as ManifestError("<file>", "<problem>").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from pyodide_app.manifest import ManifestError, ModelConfig, check_manifest, read_tensor_bytes, sha256_hex, tokenizer_identity

from .package import MANIFEST, file_entry, weights_identity
from .source import Tensor


def load_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(str(path), "missing (not a package folder)") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ManifestError(MANIFEST, f"not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise ManifestError(MANIFEST, "not a JSON object")
    return manifest


def check_files(folder: Path, manifest: dict) -> None:
    for name, expected in sorted(manifest["files"].items()):
        path = folder / name
        if not path.is_file():
            raise ManifestError(name, "missing")
        actual = file_entry(path)
        if actual["bytes"] != expected["bytes"]:
            raise ManifestError(name, f"size {actual['bytes']} bytes, manifest says {expected['bytes']} (truncated or replaced)")
        if actual["sha256"] != expected["sha256"]:
            raise ManifestError(name, "sha256 does not match the manifest (corrupted)")


def check_identity(folder: Path, manifest: dict) -> None:
    identity = manifest["identity"]
    tokenizer = json.loads((folder / manifest["tokenizer"]).read_text())
    for key, value in tokenizer_identity(tokenizer).items():
        if identity.get(key) != value:
            raise ManifestError(manifest["tokenizer"], f"{key.replace('_', ' ')} hash does not match the manifest identity")
    template = (folder / manifest["chat_template"]).read_bytes()
    if identity.get("chat_template") != sha256_hex(template):
        raise ManifestError(manifest["chat_template"], "hash does not match the manifest identity")
    tensors = manifest["champion"]["tensors"]
    for name, entry in tensors.items():
        if hashlib.sha256(read_tensor_bytes(folder, entry)).hexdigest() != entry["sha256"]:
            raise ManifestError(entry["parts"][0]["shard"], f"tensor {name} does not match its hash")
    if identity.get("champion_weights") != weights_identity(tensors):
        raise ManifestError(MANIFEST, "champion_weights identity does not match the tensor table")
    draft = manifest.get("draft")
    if draft is not None and identity.get("draft_weights") != file_entry(folder / draft["onnx"])["sha256"]:
        raise ManifestError(draft["onnx"], "draft_weights identity does not match the file")
    fallback = manifest.get("fallback")
    if fallback is not None and identity.get("fallback_weights") != file_entry(folder / fallback["onnx"])["sha256"]:
        raise ManifestError(fallback["onnx"], "fallback_weights identity does not match the file")


def verify_package(folder: Path) -> dict:
    folder = Path(folder)
    manifest = load_manifest(folder)
    try:
        check_manifest(manifest)
    except (KeyError, TypeError) as error:
        raise ManifestError(MANIFEST, f"malformed ({type(error).__name__}: {error})") from None
    check_files(folder, manifest)
    check_identity(folder, manifest)
    return manifest


def read_champion(folder: Path, manifest: dict | None = None) -> tuple[ModelConfig, dict[str, Tensor]]:
    """Config and tensors (raw blocks) of a package's champion, for the numpy reference."""
    folder = Path(folder)
    manifest = manifest or load_manifest(folder)
    config = ModelConfig.from_dict(manifest["champion"]["config"])
    tensors = {}
    for name, entry in manifest["champion"]["tensors"].items():
        raw = read_tensor_bytes(folder, entry)
        data = np.frombuffer(raw, dtype=np.float32 if entry["format"] == "f32" else np.uint8)
        tensors[name] = Tensor(entry["format"], tuple(entry["shape"]), data)
    return config, tensors
