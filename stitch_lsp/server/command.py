"""`stitch-lsp serve`: start the language server (stdio by default)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer


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
    p.add_argument(
        "--python-for-workers",
        metavar="PYTHON",
        help="the Python (with torch) the workers run (user-level, like "
        "$STITCH_PYTHON_FOR_WORKERS: a workspace cannot set it)",
    )
    p.add_argument(
        "--ncu-path",
        metavar="NCU",
        help="Nsight Compute's ncu (user-level, like $STITCH_NCU_PATH: a workspace cannot set it)",
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="trust a client that says nothing about workspace trust (like STITCH_TRUST=1); "
        "without it such a client gets analysis only. initializationOptions.trusted, when "
        "sent, decides: only true trusts",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="with --tcp: 127.0.0.1 (default) or ::1, loopback only"
    )
    p.add_argument("--port", type=int, default=2087, help="with --tcp (0: any free port)")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="with --tcp: a file of yours, mode 0600, holding the secret the client must send "
        "as initializationOptions.token",
    )
    p.add_argument(
        "--token",
        help="with --tcp: the secret itself (other local users can see a command line: "
        "prefer --token-file)",
    )
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


def _serve_tcp(server: StitchServer, listener: socket.socket, token: str) -> None:
    """One authenticated client (see `tcp`); the server ends when it leaves."""
    from stitch_lsp.server.tcp import PrefixedConnection, accept_one_client, announce

    print(announce(listener), file=sys.stderr, flush=True)
    server.lifeline.watch_parent = False
    server.lifeline.start()  # a processId sent by the client is watched from initialize on
    conn, prefix = accept_one_client(listener, token)
    with conn, conn.makefile("wb") as out:
        server.start_io(PrefixedConnection(conn, prefix), out, watch_parent=False)


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="stitch-lsp %(levelname)s %(name)s: %(message)s",
    )
    from stitch_lsp.cli.contract import UsageError
    from stitch_lsp.server.app import TRUST_ENV, create_server
    from stitch_lsp.server.tcp import TcpSetupError, choose_token, listen

    listener = None
    if args.tcp:
        try:
            token = choose_token(args.token, args.token_file)
            listener = listen(args.host, args.port)
        except TcpSetupError as exc:
            raise UsageError(str(exc)) from None
    elif args.token is not None or args.token_file is not None:
        raise UsageError("--token and --token-file go with --tcp")
    if args.trust:
        os.environ[TRUST_ENV] = "1"
    # The server's own environment is a user-level source (see server/scopes.py).
    for flag, var in (
        ("llm_base_url", "STITCH_LLM_BASE_URL"),
        ("llm_api_key_env", "STITCH_LLM_API_KEY_ENV"),
        ("cluster", "STITCH_CLUSTER"),
        ("python_for_workers", "STITCH_PYTHON_FOR_WORKERS"),
        ("ncu_path", "STITCH_NCU_PATH"),
    ):
        if getattr(args, flag):
            os.environ[var] = getattr(args, flag)
    server = create_server()
    try:
        if listener is not None:
            _serve_tcp(server, listener, token)
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
