"""WebKitGTK through Selenium: MiniBrowser driven by WebKitWebDriver on a private Xvfb display.

WebKitGTK has neither WebGPU nor JSPI, so it exercises the page's CPU path (champion.onnx on
onnxruntime-web wasm, acceptance in Python, the async driver of pyodide_app/waits.py).
Anything missing (the driver, Xvfb, MiniBrowser) fails loudly with what to install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

MINIBROWSER = Path("/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser")
WEBDRIVER = "/usr/bin/WebKitWebDriver"


def _require() -> None:
    missing = [
        what
        for what, ok in (
            (f"{WEBDRIVER} (apt webkit2gtk-driver)", Path(WEBDRIVER).exists()),
            (f"{MINIBROWSER} (apt libwebkit2gtk-4.1-0)", MINIBROWSER.exists()),
            ("Xvfb (apt xvfb)", shutil.which("Xvfb") is not None),
        )
        if not ok
    ]
    if missing:
        raise RuntimeError(
            "the WebKitGTK leg cannot start: missing " + ", ".join(missing) + " (scripts/setup.sh installs them)"
        )


@contextlib.contextmanager
def xvfb_display():
    """A fresh X display; yields its name (":N")."""
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x900x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()
        if not number:
            raise RuntimeError(f"Xvfb did not start (exit code {server.poll()})")
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@contextlib.contextmanager
def webkit_driver():
    """A Selenium WebDriver for MiniBrowser (automation mode) on its own display."""
    _require()
    from selenium import webdriver
    from selenium.webdriver.webkitgtk.options import Options
    from selenium.webdriver.webkitgtk.service import Service

    with xvfb_display() as display:
        options = Options()
        options.binary_location = str(MINIBROWSER)
        options.add_argument("--automation")
        service = Service(WEBDRIVER, env={**os.environ, "DISPLAY": display})
        driver = webdriver.WebKitGTK(options=options, service=service)
        try:
            yield driver
        finally:
            driver.quit()
