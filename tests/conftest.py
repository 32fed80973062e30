"""Helpers shared by the tests. The package fixtures (synthetic, real SmolLM2) live in ../conftest.py,
so tests/ and e2e/ share one build per session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_build_tools(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m build_tools ...` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "build_tools", *args], capture_output=True, text=True, cwd=ROOT, input=stdin, timeout=900
    )
