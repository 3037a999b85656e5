"""`stitch-lsp check`: static diagnostics without an editor, printed like a compiler's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="static checks of Python/CUDA files, like the editor shows")
    p.add_argument("paths", nargs="+", help="files or folders (*.py, *.cu, *.cuh)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--dtype",
        choices=("auto", "float32", "float16", "bfloat16"),
        default=None,
        help="precision of the problem (default: stitch.referenceDtype, else read from the "
        "reference's get_inputs, else float32)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from stitch_lsp.analysis.check import check_paths, files_checked
    from stitch_lsp.config import Settings
    from stitch_lsp.models.findings import Severity

    paths = [Path(p) for p in args.paths]
    missing = [p for p in paths if not p.exists()]
    if missing:
        for p in missing:
            print(f"stitch-lsp check: {p}: no such file or folder", file=sys.stderr)
        return 2
    report = check_paths(paths, Settings.from_sources(reference_dtype=args.dtype))
    if args.format == "json":
        print(report.model_dump_json(indent=2))
    else:
        counts = dict.fromkeys(Severity, 0)
        for d in report.diagnostics:
            counts[d.severity] += 1
            print(f"{d.path}:{d.line}:{d.column}: {d.severity.value}: {d.message} [{d.code}]")
        n = files_checked(paths)
        tally = [
            _count(counts[Severity.error], "error"),
            _count(counts[Severity.warning], "warning"),
            _count(counts[Severity.information], "info"),
        ]
        if counts[Severity.hint]:
            tally.append(_count(counts[Severity.hint], "hint"))
        print(f"{_count(n, 'file')} checked: {', '.join(tally)}")
    return 1 if report.has_errors else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
