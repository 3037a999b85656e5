"""`stitch-lsp bench DIR`: coverage, correctness and speedups of a coder on KernelBench."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from stitch_lsp.cli.contract import int_range

if TYPE_CHECKING:
    from stitch_lsp.agents.bench import BenchReport, BenchRow
    from stitch_lsp.config import Settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="generate and verify over a folder of KernelBench-format problems"
    )
    p.add_argument("folder", help="a folder of problems, or one that holds level1/, level2/, ...")
    p.add_argument("--level", type=int, help="use FOLDER/levelN when it exists")
    p.add_argument("--coder", choices=("builtin", "llm"), default="builtin")
    p.add_argument(
        "--limit", type=int_range(1), help="only the first K problems (by problem number)"
    )
    p.add_argument("--only", help="comma-separated problem numbers or name fragments to run")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="json: print the report as JSON on stdout (the table goes to stderr)",
    )
    p.add_argument("--json", dest="json_out", help="write the report as JSON to this file")
    p.add_argument("--markdown", help="write the table as Markdown here (default: JSON's .md)")
    p.add_argument("--out", help="folder for the candidates (default: .stitch/bench/<coder>)")
    p.add_argument("--devices", help="GPUs to use, e.g. cuda:0,cuda:1 (default: every visible)")
    p.add_argument(
        "--no-extra-baselines",
        action="store_true",
        help="time only eager and torch.compile (skip the CUDA-graph and reduce-overhead columns)",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="generate and verify on a Ray cluster, one job per cluster GPU (ray://head:10001, "
        "or head:6379 inside the cluster); without ADDRESS a local Ray is started for the run",
    )
    p.set_defaults(func=_run)


def _select(files: list[Path], only: str | None) -> list[Path]:
    if not only:
        return files
    wanted = [w.strip() for w in only.split(",") if w.strip()]

    def hit(p: Path) -> bool:
        number = p.name.split("_", 1)[0]
        return any(w == number or (not w.isdigit() and w in p.stem) for w in wanted)

    return [p for p in files if hit(p)]


def _run(args: argparse.Namespace) -> int:
    from stitch_lsp.agents.bench import problem_files
    from stitch_lsp.cli.contract import UsageError, emit_json, load_settings, writable_folder
    from stitch_lsp.files import display_path
    from stitch_lsp.verify import visible_gpus

    as_json = args.format == "json"
    folder = Path(args.folder)
    if not folder.is_dir():
        raise UsageError(f"{display_path(folder)}: no such folder")
    files = _select(problem_files(folder, args.level, None), args.only)
    if args.limit:
        files = files[: args.limit]
    if not files:
        raise UsageError(f"no problems found in {display_path(folder)}")
    settings = load_settings()
    for path in _output_paths(args):  # found before hours of work, not after
        writable_folder(path.parent if str(path.parent) else Path("."), "output")
    note = sys.stderr if as_json else sys.stdout
    with ExitStack() as stack:
        address = args.ray or settings.cluster
        if address:
            from stitch_lsp.cluster.use import join_for_run

            devices = join_for_run(stack, address, "stitch-lsp bench")
            if devices is None:  # it said why on stderr
                if as_json:
                    emit_json({"error": f"the cluster at {address} cannot be used"})
                return 2
            if not devices:
                print("The cluster has no GPU: candidates are generated, not verified.", file=note)
        else:
            devices = (
                [d.strip() for d in args.devices.split(",")] if args.devices else visible_gpus()
            )
            if not devices:
                print("No CUDA GPU visible: candidates are generated, not verified.", file=note)
        return _bench(args, folder, files, settings, devices)


def _output_paths(args: argparse.Namespace) -> list[Path]:
    """(JSON file, Markdown file) the report goes to, where asked for."""
    json_path = Path(args.json_out) if args.json_out else None
    md_path = (
        Path(args.markdown)
        if args.markdown
        else (json_path.with_suffix(".md") if json_path else None)
    )
    return [p for p in (json_path, md_path) if p is not None]


def _bench(
    args: argparse.Namespace,
    folder: Path,
    files: list[Path],
    settings: Settings,
    devices: list[str],
) -> int:
    from stitch_lsp.agents.bench import (
        BenchReport,
        run_bench,
        summarise,
        write_outputs,
    )
    from stitch_lsp.cli.contract import emit_json

    as_json = args.format == "json"
    out_dir = Path(args.out or Path(".stitch") / "bench" / args.coder)
    json_path = Path(args.json_out) if args.json_out else None
    md_path = (
        Path(args.markdown)
        if args.markdown
        else (json_path.with_suffix(".md") if json_path else None)
    )

    def report_of(rows: list[BenchRow]) -> BenchReport:
        return BenchReport(
            folder=str(folder if args.level is None else folder / f"level{args.level}"),
            coder=args.coder,
            devices=list(devices),
            gpu_name=next((r.gpu_name for r in rows if r.gpu_name), None),
            date=date.today().isoformat(),
            rows=rows,
            summary=summarise(rows),
        )

    def save_partial(rows: list[BenchRow]) -> None:
        write_outputs(report_of(rows), json_path, md_path)

    with _progress(len(files), to_stderr=as_json) as (generated, verified):
        rows = run_bench(
            files,
            settings,
            coder=args.coder,
            out_dir=out_dir,
            devices=devices,
            on_generated=generated,
            on_verified=verified,
            on_rows=save_partial,
            extra_baselines=not args.no_extra_baselines,
        )
    report = report_of(rows)
    _print_table(report, to_stderr=as_json)
    write_outputs(report, json_path, md_path)
    if json_path:
        print(
            f"wrote {json_path}" + (f" and {md_path}" if md_path else ""),
            file=sys.stderr if as_json else sys.stdout,
        )
    if as_json:
        emit_json({"diagnostics": [], **report.model_dump(mode="json")})
    incorrect = [r for r in rows if r.handled and r.status and not r.correct]
    return 1 if incorrect and devices else 0


@contextmanager
def _progress(
    total: int, to_stderr: bool = False
) -> Iterator[tuple[Callable[[BenchRow], None], Callable[[BenchRow], None]]]:
    """A rich progress bar, or plain lines where rich is not installed (bare GPU machines)."""
    try:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:
        out = sys.stderr if to_stderr else sys.stdout

        def gen_line(row: BenchRow) -> None:
            print(f"generated {row.problem}: {'handled' if row.handled else row.reason}", file=out)

        def ver_line(row: BenchRow) -> None:
            print(f"verified {row.problem}: {row.status} {row.speedup_vs_eager or ''}", file=out)

        yield gen_line, ver_line
        return
    from rich.console import Console

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=to_stderr),
    ) as progress:
        gen = progress.add_task("generate", total=total)
        ver = progress.add_task("verify", total=None)
        handled = 0

        def generated(row: BenchRow) -> None:
            nonlocal handled
            handled += int(row.handled)
            progress.update(gen, advance=1, description=f"generate {row.problem[:28]}")
            progress.update(ver, total=handled)

        def verified(row: BenchRow) -> None:
            mark = "ok" if row.correct else row.status
            progress.update(ver, advance=1, description=f"verify {row.problem[:24]} {mark}")

        yield generated, verified


def _print_table(report: BenchReport, to_stderr: bool = False) -> None:
    from stitch_lsp.agents.bench import correct_word, markdown
    from stitch_lsp.cli.contract import console

    s = report.summary
    ge = f"{s.geomean_vs_eager:.3f}x" if s.geomean_vs_eager else "-"
    gc = f"{s.geomean_vs_compile:.3f}x" if s.geomean_vs_compile else "-"
    line = (
        f"coverage {s.handled}/{s.problems} ({s.coverage:.0%}), correct {s.correct}/{s.handled}, "
        f"fast_0 {s.fast_0:.0%}, fast_1 {s.fast_1:.0%}, geomean vs eager {ge}, "
        f"vs torch.compile {gc}"
    )
    if s.geomean_vs_best is not None:
        gg = f"{s.geomean_vs_graph:.3f}x" if s.geomean_vs_graph else "-"
        gr = f"{s.geomean_vs_compile_ro:.3f}x" if s.geomean_vs_compile_ro else "-"
        line += (
            f", vs CUDA graph {gg}, vs reduce-overhead {gr}, vs best {s.geomean_vs_best:.3f}x "
            f"({s.below_best} below 1.0x)"
        )
    try:
        from rich.table import Table
    except ImportError:
        print(markdown(report), file=sys.stderr if to_stderr else sys.stdout)
        return
    table = Table(title=f"stitch-lsp bench ({report.coder})")
    extra = any(r.speedup_vs_best is not None for r in report.rows)
    cols = ["problem", "handled", "correct", "vs eager", "vs compile"]
    cols += ["vs graph", "vs compile r-o", "vs best"] if extra else []
    for col in [*cols, "note"]:
        table.add_column(col)

    def x(v: float | None) -> str:
        return f"{v:.3f}x" if v else "-"

    for r in report.rows:
        note = r.reason or "; ".join(r.baseline_notes)
        note = note.splitlines()[0][:60] if note else ""
        cells = [
            r.problem,
            "yes" if r.handled else "no",
            correct_word(r) if r.handled else "-",
            x(r.speedup_vs_eager),
            x(r.speedup_vs_compile),
        ]
        if extra:
            best = f"{x(r.speedup_vs_best)} ({r.best_baseline})" if r.speedup_vs_best else "-"
            cells += [x(r.speedup_vs_graph), x(r.speedup_vs_compile_ro), best]
        table.add_row(*cells, note)
    screen = console(stderr=to_stderr)
    screen.print(table)
    screen.print(line)
