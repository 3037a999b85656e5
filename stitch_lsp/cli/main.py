"""stitch-lsp: plan, write, verify and profile fused CUDA for PyTorch modules.

Each subcommand lives beside the code it drives and registers itself here.

A command module exposes `register(subparsers)`; it adds its parser and sets `func(args) -> int`.
Imports of the heavy parts happen inside `func`, so `stitch-lsp --help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Modules that define subcommands, in the order `--help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "stitch_lsp.server.command",
    "stitch_lsp.analysis.command",
    "stitch_lsp.verify.command",
    "stitch_lsp.profile.command",
    "stitch_lsp.agents.command",
    "stitch_lsp.agents.bench_command",
)


def build_parser() -> argparse.ArgumentParser:
    from stitch_lsp import __version__
    from stitch_lsp.cli.contract import CommandParser

    parser = CommandParser(prog="stitch-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"stitch-lsp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _clean_stale_worker_folders() -> None:
    """Folders of workers whose server was killed (SIGKILL skips the cleanup): removed in the
    background, so no command waits on a large temporary folder."""
    import threading

    from stitch_lsp.workers.launch import remove_stale_folders

    threading.Thread(target=remove_stale_folders, name="stitch-stale-folders", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    from stitch_lsp.cli.contract import CommandParser, UsageError, report_error, wants_json

    argv = sys.argv[1:] if argv is None else list(argv)
    CommandParser.argv = argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (already reported)
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    as_json = getattr(args, "format", None) == "json" or wants_json(argv)
    _clean_stale_worker_folders()
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        report_error(f"stitch-lsp {args.command}: {exc}", as_json)
        return 2
    except KeyboardInterrupt:
        report_error("interrupted", as_json)
        return 130
    except Exception as exc:
        if os.environ.get("STITCH_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        report_error(
            f"stitch-lsp {args.command}: internal error: {type(exc).__name__}: {first} "
            "(STITCH_DEBUG=1 shows the traceback)",
            as_json,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
