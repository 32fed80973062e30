"""The docs quote facts that drift; these keep them equal to the code.

Catches: an error class added to errors.py (or a code renamed) without docs/ARCHITECTURE.md's list; a
pyodide_app module the architecture never names; a `time_s` key the engine reports that
docs/ENGINE.md does not explain; a build_tools command missing from the layout's command list.
"""

from __future__ import annotations

import inspect
import re

from pyodide_app import errors
from pyodide_app.engine import ChatRequest, speculative_stats
from pyodide_app.orchestrator import SpecStats

from .conftest import ROOT

ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
ENGINE = (ROOT / "docs" / "ENGINE.md").read_text()


def test_every_error_code_is_listed():
    codes = {
        cls.code for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.SpecChatError)
    }
    row = next(line for line in ARCHITECTURE.splitlines() if line.startswith("| `errors.py` |"))
    listed = set(re.findall(r"`([A-Z_]+)`", row))
    assert listed == codes, f"listed but gone: {listed - codes}; missing: {codes - listed}"


def test_every_runtime_module_is_described():
    stems = {p.stem for p in (ROOT / "pyodide_app").glob("*.py") if p.stem not in ("__init__", "__main__")}
    missing = sorted(m for m in stems if not re.search(rf"\b{m}(\.py\b|\.[A-Za-z_])", ARCHITECTURE))
    assert not missing, f"docs/ARCHITECTURE.md never names {missing}"


def test_every_reported_field_is_explained():
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}]}, 8)
    stats = speculative_stats(SpecStats(), request)
    rows = {line.split("|")[1].strip(): line for line in ENGINE.splitlines() if line.startswith("| `")}
    for key in stats:
        assert any(f"`{key}`" in name for name in rows), f"docs/ENGINE.md does not explain speculative.{key}"
    time_row = next(line for name, line in rows.items() if name == "`time_s`")
    for key in stats["time_s"]:
        assert f"`{key}`" in time_row, f"docs/ENGINE.md does not explain time_s.{key}"


def test_the_layout_lists_every_build_command():
    from build_tools.__main__ import parser

    commands = set(parser()._subparsers._group_actions[0].choices)
    line = ARCHITECTURE[ARCHITECTURE.index("python -m build_tools package") :].split("\nweb/")[0]
    listed = set(re.findall(r"[a-z-]+", line.split("python -m build_tools", 1)[1]))
    assert commands <= listed, f"docs/ARCHITECTURE.md's layout lacks {commands - listed}"


def test_nothing_points_outside_the_repository():
    """Comments and docs stand alone: the repository is read without the workspace around it."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = [
        p for p in tracked if p.endswith((".py", ".js", ".wgsl", ".md", ".html", ".mjs")) and p != "tests/test_docs.py"
    ]
    pointing = [p for p in texts if any(m in (ROOT / p).read_text() for m in ("../shared", "FACTS.md", "DESIGN.md"))]
    assert not pointing, pointing
