"""stitch-lsp: plan, write, verify and profile fused CUDA for PyTorch modules.

Each subcommand lives beside the code it drives and registers itself here.

A command module exposes `register(subparsers)`; it adds its parser and sets `func(args) -> int`.
Imports of the heavy parts happen inside `func`, so `stitch-lsp --help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
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

    parser = argparse.ArgumentParser(prog="stitch-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"stitch-lsp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
