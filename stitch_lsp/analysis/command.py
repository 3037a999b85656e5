"""`stitch-lsp check`: static diagnostics without an editor."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="static checks of Python/CUDA files, like the editor shows")
    p.add_argument("paths", nargs="+", help="files or folders (*.py, *.cu, *.cuh)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    raise SystemExit("check: not implemented yet")
