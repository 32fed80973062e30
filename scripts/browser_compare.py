"""Drive the served page with Playwright, ask one prompt, run Compare, print the table (not a test).

    make run &    # or: .venv/bin/python -m build_tools serve --port 8000
    .venv/bin/python scripts/browser_compare.py --url http://127.0.0.1:8000/ --browser chromium|firefox [--no-webgpu]

Screenshots go to test-results/real-<browser>[-no-webgpu]-compare.png. Arms run in one page session,
so the ratios are side by side; absolute speeds depend on what else the machine is doing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
PROMPT = (
    "Rewrite this sentence with correct spelling: "
    "The quick brown fox jumpd over the lazy dog and the dog was not amused."
)
SETTINGS = "{proposer: 'prompt_lookup', k: 4, temperature: 0, max_tokens: 24}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000/")
    parser.add_argument("--browser", choices=("chromium", "firefox"), default="chromium")
    parser.add_argument("--no-webgpu", action="store_true", help="Chromium with WebGPU disabled: the CPU champion")
    parser.add_argument("--prompt", default=PROMPT)
    args = parser.parse_args()
    out = ROOT / "test-results"
    out.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        if args.browser == "chromium":
            flags = (
                ["--disable-features=WebGPU"]
                if args.no_webgpu
                else ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"]
            )
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=flags + ["--disable-quic"])
        else:
            browser = playwright.firefox.launch(
                channel="moz-firefox",
                executable_path="/usr/bin/firefox-esr",
                firefox_user_prefs={"dom.webgpu.enabled": True, "gfx.webgpu.ignore-blocklist": True},
            )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.add_init_script(f"localStorage.setItem('spec-chat-settings', JSON.stringify({SETTINGS}))")
        started = time.perf_counter()
        page.goto(args.url + "?nosw")
        page.wait_for_selector("#backend")
        page.wait_for_selector("#loading", state="hidden", timeout=900_000)
        print(
            f"loaded in {time.perf_counter() - started:.1f} s: {page.text_content('#backend')} "
            f"{page.text_content('#fatal-message')}"
        )
        started = time.perf_counter()
        page.fill("#input", args.prompt)
        page.keyboard.press("Enter")
        page.locator(".message.assistant[data-finish]").first.wait_for(timeout=1_800_000)
        print(f"answer in {time.perf_counter() - started:.1f} s: {page.text_content('.message.assistant')}")
        page.click("#open-settings")
        page.click("#compare")
        page.wait_for_selector("#compare-results:not([hidden])", timeout=3_000_000)
        for row in page.locator("#compare-table tr").all():
            print(" | ".join(cell.text_content() for cell in row.locator("th, td").all()))
        print(page.text_content("#compare-identity"))
        name = f"real-{args.browser}{'-no-webgpu' if args.no_webgpu else ''}-compare.png"
        page.screenshot(path=str(out / name))
        print(f"screenshot: test-results/{name}")
        browser.close()


if __name__ == "__main__":
    main()
