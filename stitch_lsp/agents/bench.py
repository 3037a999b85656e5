"""`stitch-lsp bench`: generate and verify over a folder of KernelBench-format problems.

Generation runs in one torch worker (builtin) or through the agent loop (llm); verification goes
through the Verifier, one job per GPU at a time, on every GPU given. Results: a table on the
terminal, and the same rows as JSON and Markdown.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import Field

from stitch_lsp.config import Settings
from stitch_lsp.models.base import Record


class BenchRow(Record):
    problem: str
    handled: bool
    correct: bool = False
    status: str = ""
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_graph: float | None = None
    speedup_vs_compile_ro: float | None = None
    speedup_vs_best: float | None = Field(None, description="Against the fastest baseline.")
    best_baseline: str | None = Field(None, description="eager, graph, compile or compile-ro.")
    eager_ms: float | None = None
    compile_ms: float | None = None
    graph_ms: float | None = Field(None, description="The reference under a CUDA graph.")
    compile_ro_ms: float | None = Field(None, description="torch.compile reduce-overhead.")
    candidate_ms: float | None = None
    baseline_notes: list[str] = Field(
        default_factory=list, description="Why a baseline column could not be measured."
    )
    reason: str = ""
    rewrites: list[str] = Field(
        default_factory=list, description="The exact algebra the builtin candidate relies on."
    )
    candidate: str | None = None
    device: str | None = None
    gpu_name: str | None = None
    generate_s: float = 0.0
    verify_s: float = 0.0


class BenchSummary(Record):
    problems: int
    handled: int
    correct: int
    coverage: float = Field(description="Share of problems the coder handled.")
    correctness: float = Field(description="Share of handled problems that were correct.")
    fast_0: float = Field(description="Share of all problems correct (KernelBench fast_0).")
    fast_1: float = Field(description="Share of all problems correct and faster than eager.")
    geomean_vs_eager: float | None = Field(None, description="Over correct problems.")
    geomean_vs_compile: float | None = None
    geomean_compile_vs_eager: float | None = Field(
        None, description="torch.compile against eager on the same problems."
    )
    geomean_vs_graph: float | None = None
    geomean_vs_compile_ro: float | None = None
    geomean_vs_best: float | None = Field(
        None, description="Against each problem's fastest baseline, over correct problems."
    )
    below_best: int = Field(0, description="Correct problems slower than their best baseline.")
    geomean_graph_vs_eager: float | None = Field(
        None, description="The CUDA-graph baseline against eager on the same problems."
    )
    geomean_best_vs_eager: float | None = Field(
        None, description="The best baseline against eager on the same problems."
    )


class BenchReport(Record):
    folder: str
    coder: str
    devices: list[str]
    date: str
    gpu_name: str | None = None
    rows: list[BenchRow]
    summary: BenchSummary


def problem_files(folder: Path, level: int | None = None, limit: int | None = None) -> list[Path]:
    """KernelBench files in `folder` (or `folder/levelN`), in problem-number order."""
    if level is not None and (folder / f"level{level}").is_dir():
        folder = folder / f"level{level}"

    def key(p: Path) -> tuple[int, str]:
        m = re.match(r"(\d+)_", p.name)
        return (int(m.group(1)) if m else 1 << 30, p.name)

    files = sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")), key=key)
    return files[:limit] if limit else files


def _geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summarise(rows: Sequence[BenchRow]) -> BenchSummary:
    n = len(rows)
    handled = sum(r.handled for r in rows)
    correct = [r for r in rows if r.correct]
    compile_vs_eager = [r.eager_ms / r.compile_ms for r in correct if r.eager_ms and r.compile_ms]
    graph_vs_eager = [r.eager_ms / r.graph_ms for r in correct if r.eager_ms and r.graph_ms]
    best_vs_eager = [
        r.speedup_vs_eager / r.speedup_vs_best
        for r in correct
        if r.speedup_vs_eager and r.speedup_vs_best
    ]
    return BenchSummary(
        problems=n,
        handled=handled,
        correct=len(correct),
        coverage=handled / n if n else 0.0,
        correctness=len(correct) / handled if handled else 0.0,
        fast_0=len(correct) / n if n else 0.0,
        fast_1=sum(1 for r in correct if (r.speedup_vs_eager or 0) > 1.0) / n if n else 0.0,
        geomean_vs_eager=_geomean([r.speedup_vs_eager or 0 for r in correct]),
        geomean_vs_compile=_geomean([r.speedup_vs_compile or 0 for r in correct]),
        geomean_compile_vs_eager=_geomean(compile_vs_eager),
        geomean_vs_graph=_geomean([r.speedup_vs_graph or 0 for r in correct]),
        geomean_vs_compile_ro=_geomean([r.speedup_vs_compile_ro or 0 for r in correct]),
        geomean_vs_best=_geomean([r.speedup_vs_best or 0 for r in correct]),
        below_best=sum(
            1 for r in correct if r.speedup_vs_best is not None and r.speedup_vs_best < 1.0
        ),
        geomean_graph_vs_eager=_geomean(graph_vs_eager),
        geomean_best_vs_eager=_geomean(best_vs_eager),
    )


def _fmt(v: float | None, suffix: str = "x") -> str:
    return "-" if v is None else f"{v:.3f}{suffix}"


def correct_word(r: BenchRow) -> str:
    """The correct column: yes, no, or what stopped the check (`runtime error`, `timeout`,
    `compile error`, `not verified`). A candidate that could not be run (out of memory, a
    fault, a timeout) is not shown as wrong; all of these count against correctness."""
    if r.correct:
        return "yes"
    if r.status in ("incorrect", "exploit") or not r.status:
        return "no"
    return r.status.replace("_", " ")


def markdown(report: BenchReport) -> str:
    s = report.summary
    lines = [
        f"# stitch-lsp bench: {report.folder}",
        "",
        f"coder `{report.coder}`, devices {', '.join(report.devices) or 'none'}"
        + (f" ({report.gpu_name})" if report.gpu_name else "")
        + f", {report.date}",
        "",
        "| problem | handled | correct | vs eager | vs torch.compile | vs CUDA graph "
        "| vs compile r-o | vs best | eager ms | candidate ms | rewrites | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.rows:
        note = r.reason or (r.status if not r.correct else "") or "; ".join(r.baseline_notes)
        note = note.replace("|", "/").splitlines()[0][:120] if note else ""
        lines.append(
            f"| {r.problem} | {'yes' if r.handled else 'no'} | {correct_word(r)} "
            f"| {_fmt(r.speedup_vs_eager)} | {_fmt(r.speedup_vs_compile)} "
            f"| {_fmt(r.speedup_vs_graph)} | {_fmt(r.speedup_vs_compile_ro)} | {_best(r)} "
            f"| {_fmt(r.eager_ms, '')} | {_fmt(r.candidate_ms, '')} | {', '.join(r.rewrites)} "
            f"| {note} |"
        )
    lines += [
        "",
        f"- coverage: {s.handled}/{s.problems} ({s.coverage:.0%})",
        f"- correctness of handled: {s.correct}/{s.handled} ({s.correctness:.0%})",
        f"- fast_0: {s.fast_0:.0%}, fast_1: {s.fast_1:.0%}",
        f"- geometric-mean speedup over correct problems: vs eager {_fmt(s.geomean_vs_eager)}, "
        f"vs torch.compile {_fmt(s.geomean_vs_compile)} "
        f"(torch.compile vs eager on them: {_fmt(s.geomean_compile_vs_eager)})",
    ]
    if s.geomean_vs_best is not None:
        lines += [
            f"- vs CUDA graph {_fmt(s.geomean_vs_graph)}, vs torch.compile reduce-overhead "
            f"{_fmt(s.geomean_vs_compile_ro)}, vs the best of eager / graph / compile / "
            f"reduce-overhead per problem {_fmt(s.geomean_vs_best)} ({s.below_best} correct "
            f"problem(s) below 1.0x of their best); on the same problems the CUDA graph is "
            f"{_fmt(s.geomean_graph_vs_eager)} and the best baseline "
            f"{_fmt(s.geomean_best_vs_eager)} against eager",
        ]
    lines.append("")
    return "\n".join(lines)


def _best(r: BenchRow) -> str:
    if r.speedup_vs_best is None:
        return "-"
    from stitch_lsp.verify.baselines import LABELS

    return f"{r.speedup_vs_best:.3f}x ({LABELS.get(r.best_baseline or '', r.best_baseline)})"


def _row_from_verify(row: BenchRow, result: object) -> None:
    from stitch_lsp.models.verify import VerifyResult, VerifyStatus

    assert isinstance(result, VerifyResult)
    row.status = result.status.value
    row.correct = result.status is VerifyStatus.passed
    row.device = result.device
    row.gpu_name = result.gpu_name
    row.speedup_vs_eager = result.speedup_vs_eager
    row.speedup_vs_compile = result.speedup_vs_compile
    row.speedup_vs_graph = result.speedup_vs_graph
    row.speedup_vs_compile_ro = result.speedup_vs_compile_ro
    row.speedup_vs_best = result.speedup_vs_best
    row.best_baseline = result.best_baseline
    t = result.timing
    if t is not None:
        from stitch_lsp.verify.baselines import missing_notes

        # Medians, as the speedups are.
        row.eager_ms = t.eager.median if t.eager else None
        row.compile_ms = t.compiled.median if t.compiled else None
        row.graph_ms = t.graph.median if t.graph else None
        row.compile_ro_ms = t.compiled_ro.median if t.compiled_ro else None
        row.candidate_ms = t.candidate.median if t.candidate else None
        row.baseline_notes = missing_notes(t)
    if not row.correct:
        row.reason = result.message or row.status
    row.verify_s = result.wall_seconds


def run_bench(
    files: Sequence[Path],
    settings: Settings,
    *,
    coder: str,
    out_dir: Path,
    devices: Sequence[str],
    on_generated: Callable[[BenchRow], None] | None = None,
    on_verified: Callable[[BenchRow], None] | None = None,
    on_rows: Callable[[list[BenchRow]], None] | None = None,
    cancel: threading.Event | None = None,
    extra_baselines: bool = True,
) -> list[BenchRow]:
    """Generate every candidate, then verify them across `devices` (one job per GPU).

    `on_rows` sees every row after each verification, so a caller can save partial results.
    `extra_baselines`: also time the CUDA-graph and reduce-overhead columns.
    """
    from stitch_lsp.verify import DevicePool, verify

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [BenchRow(problem=f.stem, handled=False) for f in files]
    if coder == "builtin":
        from stitch_lsp.compiler import generate_candidates

        start = time.perf_counter()
        cands = generate_candidates(files, settings, candidate_dir=out_dir)
        each = (time.perf_counter() - start) / max(1, len(files))
        for f, row, cand in zip(files, rows, cands, strict=True):
            row.generate_s = round(each, 2)
            row.handled = cand.handled and bool(cand.source)
            if row.handled:
                path = out_dir / f"{f.stem}_builtin.py"
                path.write_text(cand.source or "")
                row.candidate = str(path)
                row.rewrites = list(dict.fromkeys(r.split(":")[0] for r in cand.rewrites))
            else:
                row.reason = cand.reason.splitlines()[0] if cand.reason else "not handled"
            if on_generated:
                on_generated(row)
    else:
        _generate_llm(files, rows, settings, out_dir, devices, on_generated, cancel)

    todo = [(f, r) for f, r in zip(files, rows, strict=True) if r.handled and r.candidate]
    if not devices:
        for _, row in todo:
            row.status = "not verified"
            row.reason = "no CUDA GPU visible: generated, not verified"
        return rows
    pool = DevicePool(devices)
    lock = threading.Lock()

    def job(item: tuple[Path, BenchRow], device: str) -> None:
        f, row = item
        if cancel is not None and cancel.is_set():
            row.status = "cancelled"
            return
        result = verify(
            f,
            Path(row.candidate or ""),
            settings,
            device=device,
            extra_baselines=extra_baselines,
            llm_code=coder != "builtin",
        )
        _row_from_verify(row, result)
        with lock:
            if on_verified:
                on_verified(row)
            if on_rows:
                on_rows(rows)

    pool.map(job, todo)
    return rows


def _generate_llm(
    files: Sequence[Path],
    rows: list[BenchRow],
    settings: Settings,
    out_dir: Path,
    devices: Sequence[str],
    on_generated: Callable[[BenchRow], None] | None,
    cancel: threading.Event | None,
) -> None:
    """The agent loop per problem; its best correct attempt becomes the candidate."""
    from stitch_lsp.agents.loop_factory import build_loop

    if not settings.llm_base_url:
        for row in rows:
            row.reason = "no LLM endpoint configured (set llmBaseUrl / STITCH_LLM_BASE_URL)"
            if on_generated:
                on_generated(row)
        return
    for f, row in zip(files, rows, strict=True):
        start = time.perf_counter()
        try:
            loop = build_loop(
                f,
                settings,
                compile_only=not devices,
                root=out_dir,
                cancel=cancel,
                device=devices[0] if devices else None,
            )
            result = loop.run()
            best = result.best
            if best is not None and best.code:
                path = out_dir / f"{f.stem}_llm.py"
                path.write_text(best.code)
                row.handled, row.candidate = True, str(path)
            else:
                row.reason = result.message or "no correct attempt"
        except Exception as exc:  # one failing problem must not end the bench
            row.reason = f"{type(exc).__name__}: {exc}"
        row.generate_s = round(time.perf_counter() - start, 2)
        if on_generated:
            on_generated(row)


def write_outputs(report: BenchReport, json_path: Path | None, md_path: Path | None) -> None:
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    if md_path is not None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(markdown(report))
