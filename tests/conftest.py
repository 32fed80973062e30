"""Helpers shared by the tests. The package fixtures (synthetic, real SmolLM2) live in ../conftest.py,
so tests/ and e2e/ share one build per session."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_build_tools(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m build_tools ...` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "build_tools", *args], capture_output=True, text=True, cwd=ROOT, input=stdin, timeout=900
    )


def run_node(args: list[str], payload=None, timeout: float = 120):
    """`node *args` in the repository root, `payload` as JSON on its stdin -> its stdout parsed as JSON. A missing
    node fails the test (make test installs it); a script that exits non-zero fails it with its stderr."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is required (run `make test`, which installs it)")
    completed = subprocess.run(
        [node, *args],
        input=None if payload is None else json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(completed.stdout)


def run_node_module(script: str, payload=None, timeout: float = 120):
    """An ES module's source run by node from the repository root (so "./web/x.js" imports resolve) -> run_node."""
    return run_node(["--input-type=module", "-e", script], payload, timeout)
