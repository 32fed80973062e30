"""Checking a model package on disk (standard library only): schema, every file's size and sha256, and the
identity block recomputed from the contents. The builder (build_tools), the CLIs and the native loader all
use it; the first problem is raised as ManifestError("<file>", "<problem>").

("verify" in this project means speculative verification; a package is "checked".)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .manifest import ManifestError, canonical_json, check_manifest, read_tensor_bytes, sha256_hex, tokenizer_identity

MANIFEST_FILE = "manifest.json"


def file_entry(path: Path) -> dict:
    """{"bytes", "sha256"} of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": Path(path).stat().st_size, "sha256": digest.hexdigest()}


def weights_identity(tensors: dict[str, dict]) -> str:
    """Hash of the tensor table with each tensor's content hash (independent of sharding)."""
    return sha256_hex(canonical_json({n: [t["format"], t["shape"], t["sha256"]] for n, t in tensors.items()}))


def load_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(str(path), "missing (not a package folder)") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ManifestError(MANIFEST_FILE, f"not valid JSON ({error})") from None
    if not isinstance(manifest, dict):
        raise ManifestError(MANIFEST_FILE, "not a JSON object")
    return manifest


def check_files(folder: Path, manifest: dict) -> None:
    for name, expected in sorted(manifest["files"].items()):
        path = folder / name
        if not path.is_file():
            raise ManifestError(name, "missing")
        actual = file_entry(path)
        if actual["bytes"] != expected["bytes"]:
            raise ManifestError(
                name, f"size {actual['bytes']} bytes, manifest says {expected['bytes']} (truncated or replaced)"
            )
        if actual["sha256"] != expected["sha256"]:
            raise ManifestError(name, "sha256 does not match the manifest (corrupted)")


def check_identity(folder: Path, manifest: dict) -> None:
    identity = manifest["identity"]
    tokenizer = json.loads((folder / manifest["tokenizer"]).read_text())
    for key, value in tokenizer_identity(tokenizer).items():
        if identity.get(key) != value:
            raise ManifestError(
                manifest["tokenizer"], f"{key.replace('_', ' ')} hash does not match the manifest identity"
            )
    template = (folder / manifest["chat_template"]).read_bytes()
    if identity.get("chat_template") != sha256_hex(template):
        raise ManifestError(manifest["chat_template"], "hash does not match the manifest identity")
    tensors = manifest["champion"]["tensors"]
    for name, entry in tensors.items():
        if hashlib.sha256(read_tensor_bytes(folder, entry)).hexdigest() != entry["sha256"]:
            raise ManifestError(entry["parts"][0]["shard"], f"tensor {name} does not match its hash")
    if identity.get("champion_weights") != weights_identity(tensors):
        raise ManifestError(MANIFEST_FILE, "champion_weights identity does not match the tensor table")
    for entry_name, identity_key in (("draft", "draft_weights"), ("fallback", "fallback_weights")):
        entry = manifest.get(entry_name)
        if entry is not None and identity.get(identity_key) != file_entry(folder / entry["onnx"])["sha256"]:
            raise ManifestError(entry["onnx"], f"{identity_key} identity does not match the file")


def check_package(folder: Path) -> dict:
    """The package's manifest, after every check passed."""
    folder = Path(folder)
    manifest = load_manifest(folder)
    try:
        check_manifest(manifest)
    except (KeyError, TypeError) as error:
        raise ManifestError(MANIFEST_FILE, f"malformed ({type(error).__name__}: {error})") from None
    check_files(folder, manifest)
    check_identity(folder, manifest)
    return manifest
