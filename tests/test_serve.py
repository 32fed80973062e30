"""The site server: loopback only, cross-origin isolation headers, MIME types."""

from __future__ import annotations

import threading
import urllib.request

import pytest

from build_tools.serve import make_server


@pytest.fixture
def site_server(tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>")
    (tmp_path / "core.wasm").write_bytes(b"\0asm\1\0\0\0")
    (tmp_path / "worker.mjs").write_text("export {};")
    server = make_server(tmp_path, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def fetch(server, path):
    host, port = server.server_address[:2]
    return urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10)


def test_binds_to_loopback_only(site_server):
    assert site_server.server_address[0] == "127.0.0.1"


def test_isolation_headers_and_mime_types(site_server):
    page = fetch(site_server, "/")
    assert page.headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert page.headers["Cross-Origin-Embedder-Policy"] == "require-corp"
    assert page.headers["Content-Type"].startswith("text/html")
    assert fetch(site_server, "/core.wasm").headers["Content-Type"] == "application/wasm"
    assert fetch(site_server, "/worker.mjs").headers["Content-Type"] == "text/javascript"


def test_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="index.html not found"):
        make_server(tmp_path, port=0)
