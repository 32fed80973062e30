"""Command line of the build tools."""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m build_tools", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the site on 127.0.0.1 with COOP/COEP headers")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--site", type=Path, default=ROOT / "web")
    args = parser.parse_args(argv)

    if args.command == "serve":
        from .serve import serve as run_server

        run_server(args.site, args.port)


if __name__ == "__main__":
    main()
