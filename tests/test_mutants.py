"""The mutation suite: every named mutant of the exactness-critical code (mutants.py) must be caught.

For each mutant: copy the code and tests to a temporary folder, apply the mutant, run its catcher there
in a fresh interpreter (so the mutated module is the one imported), and require that test to fail (exit
status 1 and a FAILED line naming it; a crash or a collection error does not count as caught). A control run
first requires every catcher to pass on the unmutated copy, so a failure below is the mutant's doing and not
the copy's. A summary line "mutants: N, caught: M" is printed; a surviving mutant fails this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT
from .mutants import CATCHERS, MUTANTS, Mutant, apply

COPIED = ("pyodide_app", "shaders", "tests", "build_tools", "conftest.py", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", "drafts", "*.pyc")
RESULTS: dict[str, str] = {}


def copy_tree(destination: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=IGNORED)
        else:
            shutil.copy2(source, destination / name)
    (destination / "node_modules").symlink_to(ROOT / "node_modules")  # onnxruntime-web for the sampler tests


def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_tests(folder: Path, node_ids) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *node_ids]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, env=environment(), timeout=1800)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pristine")
    copy_tree(folder)
    imported = subprocess.run(
        [sys.executable, "-c", "import pyodide_app, build_tools; print(pyodide_app.__file__, build_tools.__file__)"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=environment(),
    )
    assert imported.stdout.split() == [
        str(folder / "pyodide_app" / "__init__.py"),
        str(folder / "build_tools" / "__init__.py"),
    ], imported
    return folder


def test_every_catcher_passes_on_the_unmutated_copy(pristine, tmp_path):
    """The control: without a mutant every catcher passes on the copy, so a failure below is the mutant's
    doing and not the copy's (a missing file or package would otherwise 'catch' every mutant)."""
    folder = tmp_path / "tree"
    shutil.copytree(pristine, folder, symlinks=True)
    result = run_tests(folder, CATCHERS)
    summary = result.stdout.splitlines()[-1] if result.stdout else ""
    assert result.returncode == 0 and summary.startswith(f"{len(CATCHERS)} passed"), (
        f"the catchers fail without a mutant:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
    )


def test_every_mutant_applies_to_the_current_code():
    for mutant in MUTANTS:
        apply(mutant, (ROOT / mutant.path).read_text())


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(pristine, tmp_path, mutant: Mutant):
    folder = tmp_path / "tree"
    shutil.copytree(pristine, folder, symlinks=True)
    target = folder / mutant.path
    target.write_text(apply(mutant, target.read_text()))
    started = time.perf_counter()
    result = run_tests(folder, [mutant.caught_by])
    failed = [line for line in result.stdout.splitlines() if line.startswith(f"FAILED {mutant.caught_by}")]
    verdict = "caught" if result.returncode == 1 and failed else "SURVIVED"
    RESULTS[mutant.name] = verdict
    print(
        f"\n[mutant] {mutant.name}: {verdict} in {time.perf_counter() - started:.0f} s "
        f"by {failed[0][7:].split(' - ')[0] if failed else '-'} ({mutant.bug})"
    )
    caught = sum(v == "caught" for v in RESULTS.values())
    print(f"[mutants] mutants: {len(RESULTS)}, caught: {caught}")
    assert result.returncode == 1 and failed, (
        f"mutant {mutant.name} ({mutant.bug}) survived its catcher {mutant.caught_by}: exit "
        f"{result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}"
    )
