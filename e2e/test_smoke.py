"""Smoke test of the browser app on the synthetic package: load, chat, Compare, offline, no foreign
requests — in Chromium (SwiftShader) and Firefox (lavapipe). The full conformance suite is its own issue."""

from __future__ import annotations

import json
from urllib.parse import urlparse

import pytest

from .conftest import launch

SETTINGS = {"proposer": "prompt_lookup", "k": 4, "adaptive": False, "temperature": 0, "top_p": 1, "top_k": 0,
            "repetition_penalty": 1, "seed": 0, "max_tokens": 16}
PROMPT = "hello world"


def native_tokens(model, proposer="prompt_lookup") -> list[int]:
    from pyodide_app.native.loader import load_engine

    engine = load_engine(model, context_limit=256)
    request = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16, "temperature": 0,
               "speculative": {"proposer": proposer, "k": 4 if proposer != "none" else 0}}
    return list(engine.chat(request))[-1]["tokens"]


def open_app(browser, url, foreign: list):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    origin = urlparse(url).netloc

    def guard(route):
        if urlparse(route.request.url).netloc != origin:
            foreign.append(route.request.url)
            return route.abort()
        return route.continue_()

    context.route("**/*", guard)
    page = context.new_page()
    page.add_init_script(f"localStorage.setItem('spec-chat-settings', {json.dumps(json.dumps(SETTINGS))})")
    page.goto(url)
    return context, page


def wait_ready(page):
    page.wait_for_selector("#backend", timeout=60_000)
    page.wait_for_selector("#loading", state="hidden", timeout=300_000)
    assert page.is_hidden("#fatal"), page.text_content("#fatal-message")


def ask(page, text: str) -> list[int]:
    count = page.locator(".message.assistant[data-finish]").count()
    page.fill("#input", text)
    page.keyboard.press("Enter")
    page.locator(".message.assistant[data-finish]").nth(count).wait_for(timeout=300_000)  # no eval: the CSP forbids it
    return json.loads(page.locator(".message.assistant[data-finish]").last.get_attribute("data-tokens"))


@pytest.mark.parametrize("engine", ["chromium", "firefox"])
def test_page_chats_compares_and_matches_the_native_engine(playwright_instance, site_url, synth_model, artifacts, engine):
    browser = launch(playwright_instance, engine)
    foreign: list[str] = []
    try:
        context, page = open_app(browser, site_url + "?nosw", foreign)
        wait_ready(page)
        assert "WebGPU" in page.text_content("#backend")
        tokens = ask(page, PROMPT)
        assert tokens == native_tokens(synth_model)  # same kernels, same Philox: identical greedy tokens
        page.click("#open-settings")
        page.click("#compare")
        page.wait_for_selector("#compare-results:not([hidden])", timeout=300_000)
        assert "identical across 3 proposers" in page.text_content("#compare-identity")
        rows = page.locator("#compare-table tr[data-proposer]")
        assert rows.count() == 3
        for i in range(3):
            calls_per_token = float(rows.nth(i).locator("td").nth(3).text_content())
            assert calls_per_token >= 1.0
        page.screenshot(path=str(artifacts / f"smoke-{engine}-compare.png"), full_page=True)
        page.click("#close-settings")
        page.screenshot(path=str(artifacts / f"smoke-{engine}-chat.png"))
        context.close()
    finally:
        browser.close()
    assert foreign == []


def test_page_works_offline_after_the_first_visit(playwright_instance, site_url, artifacts):
    browser = launch(playwright_instance, "chromium")
    foreign: list[str] = []
    try:
        context, page = open_app(browser, site_url, foreign)
        wait_ready(page)
        page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        first = ask(page, PROMPT)
        context.set_offline(True)
        page.reload()
        wait_ready(page)
        assert ask(page, PROMPT) == first
        page.screenshot(path=str(artifacts / "smoke-offline.png"))
        context.close()
    finally:
        browser.close()
    assert foreign == []


def test_a_corrupted_shard_is_refused_with_a_visible_message(playwright_instance, tmp_path, synth_model):
    import shutil
    import threading

    from build_tools.serve import make_server
    from build_tools.site import build_site

    site = tmp_path / "site"
    build_site(synth_model, site)
    shard = site / "model" / "champion-000.bin"
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0x10
    shard.write_bytes(bytes(data))
    server = make_server(site, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = launch(playwright_instance, "chromium")
    try:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/?nosw")
        page.wait_for_selector("#fatal:not([hidden])", timeout=120_000)
        message = page.text_content("#fatal-message")
        assert "champion-000.bin" in message and "sha256" in message
    finally:
        browser.close()
        server.shutdown()
    shutil.rmtree(site)


def test_without_webgpu_the_cpu_champion_gives_the_same_tokens(playwright_instance, site_url, synth_model, artifacts):
    """Chromium with WebGPU switched off: champion.onnx on onnxruntime-web wasm, acceptance in Python."""
    browser = playwright_instance.chromium.launch(executable_path="/usr/bin/chromium", args=["--disable-quic", "--disable-features=WebGPU"])
    foreign: list[str] = []
    try:
        context, page = open_app(browser, site_url + "?nosw", foreign)
        wait_ready(page)
        assert "CPU fallback" in page.text_content("#backend")
        assert ask(page, PROMPT) == native_tokens(synth_model)
        page.screenshot(path=str(artifacts / "smoke-no-webgpu.png"))
        context.close()
    finally:
        browser.close()
    assert foreign == []


def test_webkitgtk_without_webgpu_or_jspi_chats_and_compares(site_url, synth_model, artifacts):
    """WebKitGTK (Selenium + WebKitWebDriver on Xvfb): no WebGPU, no JSPI -> the CPU champion driven
    by the async round loop; same greedy tokens as the native engine for every proposer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from .webkit import webkit_driver

    answers = (By.CSS_SELECTOR, ".message.assistant[data-finish]")
    with webkit_driver() as driver:
        driver.get(site_url + "?nosw")
        driver.execute_script("localStorage.setItem('spec-chat-settings', arguments[0])", json.dumps(SETTINGS))
        driver.refresh()
        WebDriverWait(driver, 300).until(lambda d: d.find_element(By.ID, "loading").get_attribute("hidden") is not None)
        assert driver.find_element(By.ID, "fatal").get_attribute("hidden") is not None, driver.find_element(By.ID, "fatal-message").text
        assert "CPU fallback" in driver.find_element(By.ID, "backend").text
        assert "JSPI" in driver.find_element(By.ID, "backend").text
        driver.find_element(By.ID, "input").send_keys(PROMPT)
        driver.find_element(By.ID, "send").click()  # WebKitWebDriver's "\n" does not arrive as an Enter keydown
        WebDriverWait(driver, 300).until(lambda d: len(d.find_elements(*answers)) == 1)
        assert json.loads(driver.find_elements(*answers)[0].get_attribute("data-tokens")) == native_tokens(synth_model)
        driver.find_element(By.ID, "open-settings").click()
        driver.find_element(By.ID, "compare").click()
        WebDriverWait(driver, 300).until(lambda d: d.find_element(By.ID, "compare-results").get_attribute("hidden") is None)
        assert "identical across 3 proposers" in driver.find_element(By.ID, "compare-identity").text
        driver.save_screenshot(str(artifacts / "smoke-webkitgtk-compare.png"))
