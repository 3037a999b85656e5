"""`stitch-lsp serve`: start the language server (stdio by default)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import BinaryIO


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the language server (stdio, or --tcp)")
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    p.add_argument(
        "--stdio", action="store_true", help="use stdio (the default; accepted for LSP clients)"
    )
    p.add_argument(
        "--llm-base-url",
        help="the LLM endpoint (user-level, like $STITCH_LLM_BASE_URL: a workspace cannot set it)",
    )
    p.add_argument(
        "--llm-api-key-env",
        help="the variable holding the API key (user-level, like $STITCH_LLM_API_KEY_ENV)",
    )
    p.add_argument(
        "--cluster",
        help="the Ray cluster to run jobs on (user-level, like $STITCH_CLUSTER: a workspace "
        "cannot set it)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=2087)
    p.add_argument(
        "--log-level",
        default=os.environ.get("STITCH_LOG_LEVEL", "WARNING"),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="server log level on stderr (default WARNING, or $STITCH_LOG_LEVEL)",
    )
    p.set_defaults(func=_run)


def _private_stdout() -> BinaryIO:
    """Keep fd 1 for the LSP stream only: a stray print(), or a tool a worker starts without
    capturing its output, would otherwise corrupt the protocol. Both now go to stderr."""
    sys.stdout.flush()
    lsp_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return lsp_out


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="stitch-lsp %(levelname)s %(name)s: %(message)s",
    )
    from stitch_lsp.server.app import create_server

    # The server's own environment is a user-level source (see server/scopes.py).
    for flag, var in (
        ("llm_base_url", "STITCH_LLM_BASE_URL"),
        ("llm_api_key_env", "STITCH_LLM_API_KEY_ENV"),
        ("cluster", "STITCH_CLUSTER"),
    ):
        if getattr(args, flag):
            os.environ[var] = getattr(args, flag)
    server = create_server()
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        else:
            server.start_io(sys.stdin.buffer, _private_stdout())
    finally:
        server.jobs.kill_all_processes()
        server.cluster.leave()  # its actors stopped and the session closed: os._exit skips atexit
    # Leave now: a worker thread still busy (a parse in its time budget, a probe of the
    # workers' Python) must not keep the process alive after `exit`, and the client judges
    # the exit code.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(server.exit_code)
