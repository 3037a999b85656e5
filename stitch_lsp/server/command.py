"""`stitch-lsp serve`: start the language server (stdio by default)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the language server (stdio, or --tcp)")
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2087)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from stitch_lsp.server.app import create_server

    server = create_server()
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        else:
            server.start_io()
    finally:
        server.jobs.kill_all_processes()
    return 0
