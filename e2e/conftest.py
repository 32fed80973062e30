"""Browser fixtures: sites served on 127.0.0.1, and the three engines behind one App interface.

Engines (a leg that cannot start fails with the reason, never skips):
  chromium          Chromium, WebGPU on SwiftShader                (Playwright)
  firefox           Firefox ESR, WebGPU on lavapipe                (Playwright)
  webkitgtk         WebKitGTK MiniBrowser: no WebGPU, no JSPI      (Selenium + WebKitWebDriver, Xvfb)
  chromium-nogpu    Chromium with WebGPU switched off (CPU champion with JSPI)
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from .app import App, PlaywrightApp, SeleniumApp

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-results"
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--disable-quic"]
FIREFOX_PREFS = {"dom.webgpu.enabled": True, "gfx.webgpu.ignore-blocklist": True}
GPU_ENGINES = ["chromium", "firefox"]
ALL_ENGINES = ["chromium", "firefox", "webkitgtk"]


def serve_site(model: Path, site: Path) -> tuple[str, object]:
    from build_tools.serve import make_server
    from build_tools.site import build_site

    build_site(model, site)
    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


@pytest.fixture(scope="session")
def site_url(tmp_path_factory, synth_package) -> str:
    url, server = serve_site(synth_package, tmp_path_factory.mktemp("e2e-site"))
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def real_site_url(tmp_path_factory, real_package) -> str:
    url, server = serve_site(real_package, tmp_path_factory.mktemp("e2e-real-site"))
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


def launch(playwright, engine: str):
    if engine == "chromium":
        return playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    if engine == "chromium-nogpu":
        return playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--disable-quic", "--disable-features=WebGPU"]
        )
    if engine == "firefox":
        return playwright.firefox.launch(
            channel="moz-firefox", executable_path="/usr/bin/firefox-esr", firefox_user_prefs=FIREFOX_PREFS
        )
    raise ValueError(engine)


@contextlib.contextmanager
def open_app(
    playwright, engine: str, url: str, settings: dict | None = None, foreign: list | None = None, offline_ok=False
):
    """The page in a fresh browser profile, settings pre-stored; `foreign` collects (and blocks) every
    request to another origin (Playwright engines; WebKitGTK has no request interception)."""
    if engine == "webkitgtk":
        from .webkit import webkit_driver

        with webkit_driver() as driver:
            app = SeleniumApp(driver, engine)
            if settings is not None:
                app.goto(url)
                driver.execute_script("localStorage.setItem('spec-chat-settings', arguments[0])", json.dumps(settings))
            app.goto(url)
            yield app
        return
    browser = launch(playwright, engine)
    try:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        origin = urlparse(url).netloc

        def guard(route):
            if urlparse(route.request.url).netloc != origin:
                if foreign is not None:
                    foreign.append(route.request.url)
                return route.abort()
            return route.continue_()

        context.route("**/*", guard)
        page = context.new_page()
        if settings is not None:
            page.add_init_script(
                "localStorage.getItem('spec-chat-settings') || localStorage.setItem('spec-chat-settings', "
                f"{json.dumps(json.dumps(settings))})"
            )
        app = PlaywrightApp(page, engine)
        app.context = context
        app.goto(url)
        yield app
        context.close()
    finally:
        browser.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


__all__ = ["App", "open_app", "launch", "serve_site", "GPU_ENGINES", "ALL_ENGINES"]
