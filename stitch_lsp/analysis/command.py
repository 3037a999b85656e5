"""`stitch-lsp check`: static diagnostics without an editor, printed like a compiler's."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from stitch_lsp.cli.contract import add_format


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="static checks of Python/CUDA files, like the editor shows")
    p.add_argument("paths", nargs="+", help="files or folders (*.py, *.cu, *.cuh)")
    add_format(p)
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
    from stitch_lsp.cli.contract import emit_json, load_settings, report_error, why_unreadable
    from stitch_lsp.files import display_path
    from stitch_lsp.models.findings import Severity

    as_json = args.format == "json"
    settings = load_settings(reference_dtype=args.dtype)
    paths = [Path(p) for p in args.paths]
    missing = [(p, why) for p in paths if (why := _missing(p, why_unreadable)) is not None]
    if missing:
        shown = "; ".join(f"{display_path(p)}: {why}" for p, why in missing)
        findings = check_paths([p for p, _ in missing], settings).diagnostics
        report_error(
            f"stitch-lsp check: {shown}",
            as_json,
            [d.model_dump(mode="json") for d in findings],
            files_checked=0,
        )
        return 2
    report = check_paths(paths, settings)
    n = files_checked(paths)
    if as_json:
        emit_json(
            {
                "diagnostics": [d.model_dump(mode="json") for d in report.diagnostics],
                "files_checked": n,
            }
        )
        return 1 if report.has_errors else 0
    counts = dict.fromkeys(Severity, 0)
    for d in report.diagnostics:
        counts[d.severity] += 1
        print(
            f"{display_path(d.path)}:{d.line}:{d.column}: {d.severity.value}: "
            f"{d.message} [{d.code}]"
        )
    tally = [
        _count(counts[Severity.error], "error"),
        _count(counts[Severity.warning], "warning"),
        _count(counts[Severity.information], "info"),
    ]
    if counts[Severity.hint]:
        tally.append(_count(counts[Severity.hint], "hint"))
    print(f"{_count(n, 'file')} checked: {', '.join(tally)}")
    return 1 if report.has_errors else 0


def _missing(path: Path, why_unreadable: Callable[[Path], str | None]) -> str | None:
    """Why a path given on the command line cannot be checked (a folder is fine)."""
    if path.is_dir():
        return None
    why = why_unreadable(path)
    # A FIFO or device given by name is reported as a finding, not a missing path.
    return why if why in ("no such file", "a symlink loop") else None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
