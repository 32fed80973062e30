"""A draft shipped prebuilt: draft.onnx + draft.json (its manifest entry) + provenance.json.

The distilled SmolLM2 draft (build_tools/drafts/smollm2-135m-distilled, made by `build_tools distill`)
is one. Packaging copies draft.onnx after two checks: its sha256 is the one provenance.json recorded
(here), and the champion it was distilled for has the champion's tokenizer, special tokens and chat
template (package.check_draft_identity, as for any draft: the identity that keeps speculative decoding
exact; other weights only change how often drafts pass).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .source import SourceError

FILES = ("draft.onnx", "draft.json", "provenance.json")


@dataclass(frozen=True)
class PrebuiltDraft:
    folder: Path
    entry: dict  # manifest entry: config, output_vocab, id_map, inputs, outputs
    provenance: dict
    identity: dict  # tokenizer, special_tokens, chat_template hashes of the champion it was trained with

    @property
    def agreement(self) -> float | None:
        """Its measured greedy agreement with the champion, the auto scheduler's prior: on the independent
        evaluation set when it was measured there (what users' prompts look like), else on its held-out split."""
        independent = self.provenance.get("independent_evaluation", {}).get("greedy_agreement")
        return independent if independent is not None else self.provenance.get("evaluation", {}).get("overall")

    @property
    def later_agreement(self) -> float | None:
        """Its greedy agreement at a position right after one it agreed at (the scheduler's prior for draft
        positions after the first), on the independent evaluation set; None where not measured."""
        return self.provenance.get("independent_evaluation", {}).get("greedy_agreement_after_agreement")

    @property
    def acceptance_by_entropy(self) -> dict | None:
        """Its measured greedy acceptance by the entropy of its row (provenance calibration: bins "a-b" bits and a
        last ">=c"), as the manifest field {"upper_bits": [b, ...], "acceptance": [..., above the last b]}
        (pyodide_app's AcceptanceByEntropy); None where not measured."""
        bins = self.provenance.get("calibration", {}).get("greedy_acceptance_by_entropy_bits")
        if not bins:
            return None
        bounded = sorted((float(name.split("-")[1]), rate) for name, rate in bins.items() if "-" in name)
        above = [rate for name, rate in bins.items() if name.startswith(">=")]
        if len(above) != 1 or len(bounded) + 1 != len(bins):
            raise SourceError(f"{self.folder}: provenance.json's calibration bins are not 'a-b' bins and one '>=c'")
        return {"upper_bits": [b for b, _ in bounded], "acceptance": [rate for _, rate in bounded] + above}


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
        identity = {
            key: provenance["champion_identity"][key] for key in ("tokenizer", "special_tokens", "chat_template")
        }
    except (ValueError, KeyError, TypeError) as error:
        raise SourceError(f"{folder}: draft.json / provenance.json unreadable ({error!r})") from None
    actual = hashlib.sha256((folder / "draft.onnx").read_bytes()).hexdigest()
    if actual != expected:
        raise SourceError(
            f"{folder / 'draft.onnx'}: sha256 {actual[:12]}… differs from provenance.json's {expected[:12]}… (damaged "
            "file)"
        )
    return PrebuiltDraft(folder, entry, provenance, identity)


def copy_prebuilt(draft: PrebuiltDraft, path: Path) -> dict:
    """draft.onnx -> path; returns its manifest entry."""
    shutil.copyfile(draft.folder / "draft.onnx", path)
    return {key: value for key, value in draft.entry.items() if key not in ("kind", "onnx", "description")}


def upgrade_graph(folder: Path) -> dict:
    """Rewrite a prebuilt draft.onnx in place with today's exporter graph rewrites, weights unchanged:
    its sampler rebuilt (export_onnx.replace_sampler: the exact 2^-24-grid sampler and the row's entropy)
    and its Q8_0 projections unpacked (export_onnx.unpack_q8_matmuls: the fast kernel); draft.json lists
    today's outputs. A second upgrade changes nothing. Records the rewrite in provenance.json's
    graph_history; returns the new provenance."""
    import time

    import numpy as np
    import onnx

    from .export_onnx import GRAPH_OUTPUTS, replace_sampler, unpack_q8_matmuls

    draft = read_prebuilt(folder)
    id_map = draft.entry.get("id_map")
    model = onnx.load(str(draft.folder / "draft.onnx"))
    model = replace_sampler(unpack_q8_matmuls(model), None if id_map is None else np.asarray(id_map, np.int64))
    onnx.save(model, str(draft.folder / "draft.onnx"))
    if draft.entry.get("outputs") != GRAPH_OUTPUTS:
        entry = {**draft.entry, "outputs": GRAPH_OUTPUTS}
        (draft.folder / "draft.json").write_text(json.dumps(entry))  # as distill writes it
    provenance = dict(draft.provenance)
    digest = hashlib.sha256((draft.folder / "draft.onnx").read_bytes()).hexdigest()
    if digest != provenance["draft_onnx_sha256"]:
        history = list(provenance.get("graph_history", []))
        history.append(
            {
                "rewrite": "export_onnx.replace_sampler (q on a 2^-24 grid, integer inverse CDF: exact; the row's "
                "entropy_bits output) and unpack_q8_matmuls (Q8_0 projections as MatMul over float32 weights "
                "folded at load)",
                "previous_draft_onnx_sha256": provenance["draft_onnx_sha256"],
                "rewritten": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
        )
        provenance["graph_history"] = history
        provenance["draft_onnx_sha256"] = digest
        (draft.folder / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    return provenance
