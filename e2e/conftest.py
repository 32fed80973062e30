"""Browser fixtures: a synthetic site served on 127.0.0.1, and the launch recipes of FACTS.md."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-results"
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--disable-quic"]
FIREFOX_PREFS = {"dom.webgpu.enabled": True, "gfx.webgpu.ignore-blocklist": True}


@pytest.fixture(scope="session")
def synth_model(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("e2e-model") / "pkg"
    result = subprocess.run([sys.executable, "-m", "build_tools", "synth", "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def site_url(tmp_path_factory, synth_model) -> str:
    from build_tools.serve import make_server
    from build_tools.site import build_site

    site = tmp_path_factory.mktemp("e2e-site")
    build_site(synth_model, site)
    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


def launch(playwright, engine: str):
    """Chromium (WebGPU on SwiftShader) or Firefox ESR (WebGPU on lavapipe); a failure to start is loud."""
    if engine == "chromium":
        return playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    if engine == "firefox":
        return playwright.firefox.launch(channel="moz-firefox", executable_path="/usr/bin/firefox-esr", firefox_user_prefs=FIREFOX_PREFS)
    raise ValueError(engine)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
