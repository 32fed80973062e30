"""Static file server for the site, bound to 127.0.0.1 only.

Sends COOP/COEP (cross-origin isolation, so onnxruntime-web may use
SharedArrayBuffer threads) and the MIME types the runtime files need
(.wasm as application/wasm for streaming compilation, .mjs as JavaScript).
"""

from __future__ import annotations

import functools
import http.server
from pathlib import Path

MIME_TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".zip": "application/zip",
    ".onnx": "application/octet-stream",
    ".bin": "application/octet-stream",
    ".gguf": "application/octet-stream",
    ".wgsl": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
}
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    quiet = False  # True: no request log (benchmarks print their own progress)

    def log_message(self, format, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    def end_headers(self) -> None:
        for name, value in ISOLATION_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()


def make_server(site: Path, port: int, host: str = "127.0.0.1", quiet: bool = False) -> http.server.ThreadingHTTPServer:
    if not (site / "index.html").is_file():
        raise SystemExit(f"serve: {site}/index.html not found")
    handler = functools.partial(
        type("QuietHandler", (SiteHandler,), {"quiet": True}) if quiet else SiteHandler, directory=str(site)
    )
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve(site: Path, port: int) -> None:
    server = make_server(site, port)
    host, bound_port = server.server_address[:2]
    print(f"Serving {site} at http://{host}:{bound_port}/ (Ctrl+C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
