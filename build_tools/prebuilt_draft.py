"""A draft shipped prebuilt: draft.onnx + draft.json (its manifest entry) + provenance.json.

The distilled SmolLM2 draft (build_tools/drafts/smollm2-135m-distilled, made by `build_tools distill`)
is one. Packaging copies draft.onnx after two checks: its sha256 is the one provenance.json recorded,
and the champion it was distilled for has the champion's tokenizer, special tokens and chat template
(the identity that keeps speculative decoding exact; other weights only change how often drafts pass).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pyodide_app.manifest import sha256_hex, tokenizer_identity

from .source import ModelSource, SourceError

FILES = ("draft.onnx", "draft.json", "provenance.json")


@dataclass(frozen=True)
class PrebuiltDraft:
    folder: Path
    entry: dict  # manifest entry: config, output_vocab, id_map, inputs, outputs
    provenance: dict

    @property
    def identity(self) -> dict:
        """The tokenizer identity the draft was trained with (its champion's)."""
        return {key: self.provenance["champion_identity"][key] for key in ("tokenizer", "special_tokens", "chat_template")}


def is_prebuilt(path: Path) -> bool:
    return path.is_dir() and (path / "draft.json").exists()


def read_prebuilt(folder: Path) -> PrebuiltDraft:
    folder = Path(folder)
    for name in FILES:
        if not (folder / name).is_file():
            raise SourceError(f"{folder / name}: missing (a prebuilt draft needs {', '.join(FILES)})")
    try:
        entry = json.loads((folder / "draft.json").read_text())
        provenance = json.loads((folder / "provenance.json").read_text())
        expected = provenance["draft_onnx_sha256"]
        provenance["champion_identity"]["tokenizer"]
    except (ValueError, KeyError, TypeError) as error:
        raise SourceError(f"{folder}: draft.json / provenance.json unreadable ({error!r})") from None
    actual = hashlib.sha256((folder / "draft.onnx").read_bytes()).hexdigest()
    if actual != expected:
        raise SourceError(f"{folder / 'draft.onnx'}: sha256 {actual[:12]}… differs from provenance.json's {expected[:12]}… (damaged file)")
    return PrebuiltDraft(folder, entry, provenance)


def check_prebuilt_identity(champion: ModelSource, draft: PrebuiltDraft) -> None:
    mine = {**tokenizer_identity(champion.tokenizer), "chat_template": sha256_hex(champion.chat_template.encode("utf-8"))}
    for key, value in draft.identity.items():
        if mine[key] != value:
            raise SourceError(f"{draft.folder}: draft {key.replace('_', ' ')} differs from the champion's ({champion.origin})")


def copy_prebuilt(draft: PrebuiltDraft, path: Path) -> dict:
    """draft.onnx -> path; returns its manifest entry."""
    shutil.copyfile(draft.folder / "draft.onnx", path)
    return {key: value for key, value in draft.entry.items() if key not in ("kind", "onnx", "description")}
