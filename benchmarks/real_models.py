"""Real models (torchvision, timm, transformers, a Llama decode step) through the builtin coder.

For every model of `benchmarks/real_models/` (and the decode step of
`tests/data/stitch_problems/level3/`) and every dtype asked for, this runs what `stitch-lsp
bench` runs (`stitch_lsp.agents.bench.run_bench`: the builtin generator, then the Verifier on
each GPU with all four baselines: eager, eager replayed under a CUDA graph, torch.compile and
torch.compile reduce-overhead), and reports per model: handled or refused (with the reason),
correct, the speedup against each baseline and against the best of them, and geometric means.
The case a problem builds is chosen by STITCH_MODEL_SIZE and STITCH_MODEL_DTYPE (see
`benchmarks/real_models/_common.py`); the workers inherit them.

`--capture-only` needs no GPU: it runs the generator alone, reports coverage and the refusal
reasons (grouped), and checks that every generated file parses. Without a GPU the timing mode
says so and exits 2. Needs the `models` extra (`pip install -e '.[torch,models]'`).

    python benchmarks/real_models.py --capture-only --size small --out out/real_models
    python benchmarks/real_models.py --size full --dtype float32,bfloat16 --out out/real_models
    python benchmarks/real_models.py --size full --models 'hf_*,*Decode*' --out out/lm
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib.util
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stitch_lsp.agents.bench import BenchReport, BenchRow

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "real_models"
DECODE = REPO / "tests" / "data" / "stitch_problems" / "level3" / "1_LlamaDecodeStep.py"
SIZE_ENV, DTYPE_ENV = "STITCH_MODEL_SIZE", "STITCH_MODEL_DTYPE"
DTYPES = ("float32", "bfloat16", "float16")
LIBRARIES = ("torch", "torchvision", "timm", "transformers")


def suite_files() -> list[Path]:
    """Every problem of the suite, then the decode step."""
    files = sorted(p for p in SUITE.glob("*.py") if not p.name.startswith("_"))
    return [*files, DECODE]


def select(files: list[Path], patterns: str | None) -> list[Path]:
    """Files whose stem matches one of the comma-separated globs (all when none given)."""
    if not patterns:
        return files
    globs = [g.strip() for g in patterns.split(",") if g.strip()]
    return [f for f in files if any(fnmatch.fnmatch(f.stem, g) for g in globs)]


def missing_libraries() -> list[str]:
    return [name for name in LIBRARIES if importlib.util.find_spec(name) is None]


def reason_group(reason: str) -> str:
    """A refusal without what differs from model to model (lines, sizes), so like reasons meet."""
    text = re.sub(r" \(line \d+\)", "", reason)
    # `(at transformers/models/gpt2/modeling_gpt2.py:573, called from line 40)` -> the library
    text = re.sub(r" \(at ([^/:()]+)[^:()]*:\d+(, called from line \d+)?\)", r" (in \1)", text)
    text = re.sub(r"self(\.\w+|\[\d+\])+", "self.<path>", text)
    text = re.sub(r"input `\w+`", "input `<name>`", text)
    text = re.sub(r"\b\d+\b", "N", text)
    return text.strip() or "not handled"


def unparsable(rows: list[BenchRow]) -> dict[str, str]:
    """Generated files that `ast.parse` rejects, by problem: a generator bug, whatever else."""
    bad = {}
    for row in rows:
        if row.handled and row.candidate:
            try:
                ast.parse(Path(row.candidate).read_text(), filename=row.candidate)
            except SyntaxError as exc:
                bad[row.problem] = f"line {exc.lineno}: {exc.msg}"
    return bad


def run_case(
    files: list[Path],
    size: str,
    dtype: str,
    out: Path,
    devices: list[str],
    settings: Any,
) -> tuple[BenchReport, dict[str, str]]:
    """One size and dtype over every file: generate, and verify where there are GPUs."""
    from stitch_lsp.agents.bench import BenchReport, run_bench, summarise, write_outputs

    os.environ[SIZE_ENV], os.environ[DTYPE_ENV] = size, dtype  # the workers inherit them
    case = f"{size}_{dtype}"
    json_path = out / f"{case}.json"

    def report_of(rows: list[BenchRow]) -> BenchReport:
        return BenchReport(
            folder=f"real models ({size}, {dtype})",
            coder="builtin",
            devices=list(devices),
            gpu_name=next((r.gpu_name for r in rows if r.gpu_name), None),
            date=date.today().isoformat(),
            rows=rows,
            summary=summarise(rows),
        )

    def save_partial(rows: list[BenchRow]) -> None:
        write_outputs(report_of(rows), json_path, None)

    with _progress_for(case, len(files), bool(devices)) as (generated, verified):
        rows = run_bench(
            files,
            settings,
            coder="builtin",
            out_dir=out / "candidates" / case,
            devices=devices,
            on_generated=generated,
            on_verified=verified,
            on_rows=save_partial,
            extra_baselines=True,
        )
    report = report_of(rows)
    write_outputs(report, json_path, json_path.with_suffix(".md") if devices else None)
    return report, unparsable(rows)


@contextmanager
def _progress_for(
    case: str, total: int, verifying: bool
) -> Iterator[tuple[Callable[[BenchRow], None], Callable[[BenchRow], None]]]:
    """`stitch-lsp bench`'s progress bars when verifying; when only generating, one line: the
    generator runs every model in one worker and reports them together at its end."""
    from stitch_lsp.agents.bench_command import _progress

    if verifying:
        print(f"{case}: {total} models", file=sys.stderr)
        with _progress(total, to_stderr=True) as callbacks:
            yield callbacks
        return
    from rich.console import Console

    def nothing(row: BenchRow) -> None:
        pass

    with Console(stderr=True).status(f"{case}: generating {total} models in one worker"):
        yield nothing, nothing
    print(f"{case}: generated", file=sys.stderr)


def refusals(report: BenchReport) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for row in report.rows:
        if not row.handled:
            groups[reason_group(row.reason)].append(row.problem)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def coverage_markdown(report: BenchReport, bad: dict[str, str]) -> list[str]:
    """The capture-only table: handled, parses, the refusal reason."""
    lines = ["| model | handled | parses | reason |", "|---|---|---|---|"]
    for row in report.rows:
        parses = (
            "-" if not row.handled else ("no: " + bad[row.problem] if row.problem in bad else "yes")
        )
        reason = row.reason.replace("|", "/")[:160] if not row.handled else ""
        lines.append(f"| {row.problem} | {'yes' if row.handled else 'no'} | {parses} | {reason} |")
    s = report.summary
    lines += ["", f"coverage {s.handled}/{s.problems} ({s.coverage:.0%})", ""]
    return lines


def markdown(
    size: str, cases: dict[str, tuple[BenchReport, dict[str, str]]], capture_only: bool
) -> str:
    from stitch_lsp.agents import bench

    lines = [f"# Real models, {size} size{' (capture only)' if capture_only else ''}", ""]
    for dtype, (report, bad) in cases.items():
        lines += [f"## {dtype}", ""]
        if capture_only:
            lines += coverage_markdown(report, bad)
        else:
            lines += [*bench.markdown(report).splitlines()[2:], ""]  # its own title dropped
        groups = refusals(report)
        if groups:
            lines += ["Refusals, grouped (line numbers and sizes left out):", ""]
            lines += [f"- {len(ms)}x {reason}: {', '.join(ms)}" for reason, ms in groups.items()]
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument(
        "--dtype", default="float32,bfloat16", help="comma-separated: " + ", ".join(DTYPES)
    )
    ap.add_argument("--models", help="comma-separated globs over file stems (hf_*, tv_resnet*)")
    ap.add_argument("--out", type=Path, default=Path("out/real_models"), help="report folder")
    ap.add_argument(
        "--capture-only",
        action="store_true",
        help="no GPU needed: generate only, report coverage and refusals, check each file parses",
    )
    ap.add_argument("--devices", help="GPUs to use, e.g. cuda:0,cuda:1 (default: every visible)")
    ap.add_argument("--verify-timeout", type=float, help="seconds per verification (default 600)")
    args = ap.parse_args(argv)

    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    if not dtypes or any(d not in DTYPES for d in dtypes):
        ap.error(f"--dtype: expected a comma-separated list of {', '.join(DTYPES)}")
    files = select(suite_files(), args.models)
    if not files:
        ap.error(f"--models {args.models!r} matches no model")
    missing = missing_libraries()
    if missing:
        print(
            f"missing: {', '.join(missing)}; install the models extra: "
            ".venv/bin/pip install -e '.[torch,models]'",
            file=sys.stderr,
        )
        return 2

    from stitch_lsp.cli.contract import load_settings
    from stitch_lsp.verify import visible_gpus

    devices: list[str] = []
    if not args.capture_only:
        devices = [d.strip() for d in args.devices.split(",")] if args.devices else visible_gpus()
        if not devices:
            print(
                "No CUDA GPU visible: timing needs one. Nothing was run; --capture-only "
                "generates and checks coverage without a GPU.",
                file=sys.stderr,
            )
            return 2
    overrides = {"verify_timeout_s": args.verify_timeout} if args.verify_timeout else {}
    settings = load_settings(**overrides)
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    cases = {d: run_case(files, args.size, d, args.out, devices, settings) for d in dtypes}
    text = markdown(args.size, cases, args.capture_only)
    name = f"real_models_{args.size}" + ("_capture" if args.capture_only else "")
    (args.out / f"{name}.md").write_text(text)
    combined = {
        "size": args.size,
        "capture_only": args.capture_only,
        "date": date.today().isoformat(),
        "seconds": round(time.perf_counter() - started, 1),
        "cases": {
            d: {
                **report.model_dump(mode="json"),
                "unparsable": bad,
                "refusals": refusals(report),
            }
            for d, (report, bad) in cases.items()
        },
    }
    (args.out / f"{name}.json").write_text(json.dumps(combined, indent=2) + "\n")
    print(text)
    print(f"wrote {args.out / name}.json and .md", file=sys.stderr)
    if any(bad for _, bad in cases.values()):
        return 1
    wrong = [r for report, _ in cases.values() for r in report.rows if r.handled and not r.correct]
    return 1 if wrong and not args.capture_only else 0


if __name__ == "__main__":
    sys.exit(main())
