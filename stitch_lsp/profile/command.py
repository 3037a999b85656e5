"""`stitch-lsp profile FILE` and `stitch-lsp hints REPORT.ncu-rep`: ncu findings without an editor.

Both print the same diagnostics the editor shows. `--json` gives the `diagnostics` shape of
`stitch-lsp check` (rule id as `code`), plus `kernels` with a per-kernel summary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stitch_lsp.config import Settings
    from stitch_lsp.models.profile import KernelSummary, ProfileRequest, ProfileRun
    from stitch_lsp.profile.pipeline import MappedReport

from stitch_lsp.cli.contract import (
    UsageError,
    add_format,
    input_file,
    int_range,
    positive_float,
)
from stitch_lsp.files import display_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a .py (KernelBench format) or .cu file under ncu")
    p.add_argument("path", help="a .py file with Model/ModelNew, or a .cu file with main()")
    p.add_argument("--class", dest="class_name", help="ModelNew or Model (default: ModelNew)")
    p.add_argument("--kernel", help="ncu kernel filter (default: the file's own kernels)")
    p.add_argument("--full", action="store_true", help="collect `--set full` (slower)")
    p.add_argument("--section", action="append", help="ncu section (repeatable)")
    p.add_argument("--launch-count", type=int_range(1, 10_000), default=8)
    p.add_argument("--report-dir", help="keep the .ncu-rep here (default: a temp folder)")
    p.add_argument("--ncu", default=None, help="ncu executable (default: stitch.ncuPath / PATH)")
    p.add_argument("--python", default=None, help="python with torch for .py targets")
    p.add_argument("--timeout", type=positive_float, default=600.0)
    add_format(p)
    p.set_defaults(func=_run_profile)

    h = sub.add_parser("hints", help="turn an existing .ncu-rep into diagnostics on your files")
    h.add_argument("report", help="an Nsight Compute report (.ncu-rep)")
    h.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="REPORT_PATH=LOCAL_PATH",
        help="map a source path recorded in the report (or its base name) to a local .cu or .py",
    )
    h.add_argument(
        "--root",
        action="append",
        default=[],
        help="folders or files to search for the sources (default: the current folder)",
    )
    add_format(h)
    h.set_defaults(func=_run_hints)


def _parse_maps(items: list[str]) -> dict[str, str]:
    maps: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--map wants REPORT_PATH=LOCAL_PATH, got {item!r}")
        input_file(Path(value), "--map: local file")
        maps[key] = value
    return maps


def _emit(mapped: MappedReport, as_json: bool, extra: dict[str, Any] | None = None) -> int:
    from stitch_lsp.cli.contract import emit_json
    from stitch_lsp.models.findings import CheckReport, Severity

    summaries = [k.summary for k in mapped.kernels]
    if as_json:
        doc = CheckReport(diagnostics=mapped.findings).model_dump(mode="json")
        doc["kernels"] = [s.model_dump(mode="json") for s in summaries]
        doc["report"] = mapped.report.report_path
        doc["unmapped"] = mapped.unmapped
        doc.update(extra or {})
        emit_json(doc)
        return 0
    _print_table(summaries)
    cwd = Path.cwd()
    for f in mapped.findings:
        try:
            shown = str(Path(f.path).relative_to(cwd))
        except ValueError:
            shown = f.path
        sev = "note" if f.severity in (Severity.information, Severity.hint) else f.severity.value
        print(f"{display_path(shown)}:{f.line}:{f.column}: {sev}: [{f.code}] {f.message}")
    for p in mapped.unmapped:
        print(
            f"note: no local file found for report source {p}; "
            f"pass --map {p}=LOCAL_PATH (a .cu file or the .py holding the CUDA string)",
            file=sys.stderr,
        )
    return 0


_COLUMNS = ("kernel", "time", "SM %", "mem %", "DRAM GB/s", "occupancy", "regs", "bottleneck")


def _rows(summaries: list[KernelSummary]) -> list[list[str]]:
    def f(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    rows = []
    for s in summaries:
        occ = f"{f(s.achieved_occupancy_pct, '.0f')}/{f(s.theoretical_occupancy_pct, '.0f')}%"
        rows.append(
            [
                s.name,
                f"{f(s.duration_us, '.1f')} µs",
                f(s.sm_throughput_pct, ".0f"),
                f(s.memory_throughput_pct, ".0f"),
                f(s.dram_gb_per_s, ",.0f"),
                occ,
                "-" if s.registers_per_thread is None else str(s.registers_per_thread),
                s.bottleneck,
            ]
        )
    return rows


def _print_table(summaries: list[KernelSummary]) -> None:
    rows = _rows(summaries)
    try:
        from rich.table import Table

        from stitch_lsp.cli.contract import console
    except ImportError:  # a bare GPU box may lack rich; plain columns say the same
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(_COLUMNS)]
        for r in [list(_COLUMNS), *rows]:
            print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)))
        return
    table = Table(title="Nsight Compute", show_lines=False)
    for col in _COLUMNS:
        table.add_column(col, justify="left" if col in ("kernel", "bottleneck") else "right")
    for r in rows:
        table.add_row(*r)
    console().print(table)


def _run_hints(args: argparse.Namespace) -> int:
    from stitch_lsp.cli.contract import report_error
    from stitch_lsp.profile.pipeline import map_report, source_mapper
    from stitch_lsp.profile.worker.report import ReportError, load_report

    as_json = args.format == "json"
    input_file(Path(args.report), "report")
    maps = _parse_maps(args.map)
    try:
        report = load_report(args.report)
    except ReportError as exc:
        report_error(f"stitch-lsp hints: {exc}", as_json, kernels=[])
        return 2
    roots = [Path(r) for r in args.root] or [Path.cwd()]
    return _emit(map_report(report, source_mapper(report, roots, maps=maps)), as_json)


def _run_profile(args: argparse.Namespace) -> int:
    from stitch_lsp.cli.contract import emit_json, load_settings
    from stitch_lsp.models.profile import ProfileRequest
    from stitch_lsp.profile.pipeline import map_report, source_mapper

    as_json = args.format == "json"
    settings = load_settings()
    path = input_file(Path(args.path), "file").resolve()
    req = ProfileRequest(
        path=str(path),
        class_name=args.class_name,
        kernel_regex=args.kernel,
        sections=args.section or list(settings.ncu_sections),
        full_set=args.full or settings.ncu_full_set,
        launch_count=args.launch_count,
        ncu_path=args.ncu or settings.ncu_path,
        python=args.python or settings.python_for_workers,
        report_dir=args.report_dir,
        timeout_s=args.timeout,
    )
    run = _launch(req, settings)
    if not run.ok or run.report is None:
        if as_json:
            info = _run_info(run)
            info["error"] = run.error or "the profile failed"
            emit_json({"diagnostics": [], "kernels": [], **info})
        else:
            print(f"stitch-lsp profile: {run.error}", file=sys.stderr)
            if run.log_tail:
                print(run.log_tail, file=sys.stderr)
        return 1
    mapper = source_mapper(run.report, [path.parent], preferred=path)
    mapped = map_report(run.report, mapper, origin=path, class_name=args.class_name)
    return _emit(mapped, as_json, _run_info(run))


def _launch(req: ProfileRequest, settings: Settings) -> ProfileRun:
    """The profile worker, started like every worker (in the sandbox): the file's code and
    ncu's target never run in this process."""
    from stitch_lsp.models.profile import ProfileErrorKind, ProfileRun
    from stitch_lsp.profile.client import run_profile
    from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind

    try:
        return run_profile(req, timeout_s=req.timeout_s + 60, sandbox=settings.sandbox)
    except WorkerError as exc:
        kind = ProfileErrorKind.timeout if exc.kind is WorkerErrorKind.timeout else None
        tail = exc.log_tail.strip()
        return ProfileRun(
            ok=False,
            error_kind=kind or ProfileErrorKind.failed,
            error=exc.message,
            log_tail=tail[-2000:],
        )


def _run_info(run: ProfileRun) -> dict[str, Any]:
    return {
        "ok": run.ok,
        "error_kind": run.error_kind.value if run.error_kind else None,
        "error": run.error,
        "report": run.report_path,
        "command": run.command,
        "wall_s": round(run.wall_s, 3),
        "ncu_s": round(run.ncu_s, 3),
        "build_s": round(run.build_s, 3),
        "log_tail": None if run.ok else run.log_tail,
    }
