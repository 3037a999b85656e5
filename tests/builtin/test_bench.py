"""`stitch-lsp bench`: problem selection, the summary figures, and a run without a GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stitch_lsp.agents.bench import BenchRow, markdown, problem_files, summarise

from .problems import PROBLEMS, UNSUPPORTED

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)


def test_problem_files_order_and_level(tmp_path: Path) -> None:
    lvl = tmp_path / "level2"
    lvl.mkdir()
    for name in ("10_b.py", "2_a.py", "1_c.py", "_skip.py"):
        (lvl / name).write_text("")
    assert [p.name for p in problem_files(tmp_path, 2)] == ["1_c.py", "2_a.py", "10_b.py"]
    assert [p.name for p in problem_files(lvl, None, limit=2)] == ["1_c.py", "2_a.py"]


def test_summary_figures() -> None:
    rows = [
        BenchRow(
            problem="a",
            handled=True,
            correct=True,
            speedup_vs_eager=2.0,
            speedup_vs_compile=1.0,
            eager_ms=2.0,
            compile_ms=1.0,
        ),
        BenchRow(
            problem="b",
            handled=True,
            correct=True,
            speedup_vs_eager=0.5,
            speedup_vs_compile=0.25,
            eager_ms=1.0,
            compile_ms=0.5,
        ),
        BenchRow(problem="c", handled=True, correct=False, status="incorrect"),
        BenchRow(problem="d", handled=False, reason="cumprod is not supported"),
    ]
    s = summarise(rows)
    assert (s.problems, s.handled, s.correct) == (4, 3, 2)
    assert s.coverage == 0.75 and s.fast_0 == 0.5 and s.fast_1 == 0.25
    assert math.isclose(s.correctness, 2 / 3)
    assert math.isclose(s.geomean_vs_eager or 0, 1.0)
    assert math.isclose(s.geomean_vs_compile or 0, 0.5)
    assert math.isclose(s.geomean_compile_vs_eager or 0, 2.0)


def test_bench_without_gpu_generates_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from stitch_lsp.cli.main import main

    probs = tmp_path / "problems"
    probs.mkdir()
    (probs / "1_softmax.py").write_text(PROBLEMS["softmax_rows"])
    (probs / "2_cumprod.py").write_text(UNSUPPORTED["cumprod"][0])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    out = tmp_path / "bench.json"
    rc = main(["bench", str(probs), "--json", str(out), "--out", str(tmp_path / "cands")])
    assert rc == 0
    data = json.loads(out.read_text())
    rows = {r["problem"]: r for r in data["rows"]}
    assert rows["1_softmax"]["handled"] and rows["1_softmax"]["status"] == "not verified"
    assert not rows["2_cumprod"]["handled"] and "cumprod" in rows["2_cumprod"]["reason"]
    assert data["summary"]["coverage"] == 0.5
    assert (tmp_path / "cands" / "1_softmax_builtin.py").is_file()
    md = out.with_suffix(".md").read_text()
    assert "| 1_softmax | yes | not verified |" in md and "coverage: 1/2" in md
    assert "| 2_cumprod | no | no |" in md
    assert "1_softmax" in capsys.readouterr().out


def test_markdown_has_every_row() -> None:
    from stitch_lsp.agents.bench import BenchReport

    rows = [
        BenchRow(problem="x", handled=True, correct=True, speedup_vs_eager=1.1),
        BenchRow(problem="y", handled=True, correct=True, rewrites=["sum_before_linear"]),
    ]
    report = BenchReport(
        folder="f",
        coder="builtin",
        devices=["cuda:0"],
        date="2026-12-02",
        rows=rows,
        summary=summarise(rows),
    )
    text = markdown(report)
    assert "| x | yes | yes | 1.100x |" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| y |"))
    assert row.endswith("| sum_before_linear |  |")  # the algebra it relies on, its own column


def test_markdown_says_why_a_candidate_was_not_correct() -> None:
    from stitch_lsp.agents.bench import BenchReport

    rows = [
        BenchRow(problem="wrong", handled=True, correct=False, status="incorrect"),
        BenchRow(problem="oom", handled=True, correct=False, status="runtime_error"),
        BenchRow(problem="ok", handled=True, correct=True, status="passed"),
    ]
    summary = summarise(rows)
    text = markdown(
        BenchReport(folder="f", coder="builtin", devices=[], date="d", rows=rows, summary=summary)
    )
    assert "| wrong | yes | no |" in text
    assert "| oom | yes | runtime error |" in text
    assert summary.correct == 1 and summary.handled == 3  # a run that failed still counts


def test_baseline_columns_and_best_of_four() -> None:
    from stitch_lsp.agents.bench import BenchReport, _row_from_verify
    from stitch_lsp.models.verify import TimingReport, TimingStats, VerifyResult, VerifyStatus
    from stitch_lsp.verify.baselines import apply_speedups

    def ms(v: float) -> TimingStats:
        return TimingStats(median=v, mean=v + 1, std=0.0, min=v, max=v, n=5)

    def verified(name: str, timing: TimingReport) -> BenchRow:
        result = VerifyResult(status=VerifyStatus.passed, timing=timing, wall_seconds=3.0)
        apply_speedups(result)
        row = BenchRow(problem=name, handled=True)
        _row_from_verify(row, result)
        return row

    # a: the graph is the best baseline and the candidate beats it; b: graph capture failed and
    # eager is best; the candidate is slower than it.
    a = verified(
        "a",
        TimingReport(
            eager=ms(4.0), compiled=ms(3.0), graph=ms(2.0), compiled_ro=ms(2.5), candidate=ms(1.0)
        ),
    )
    b = verified(
        "b",
        TimingReport(
            eager=ms(1.0),
            compiled=ms(1.6),
            candidate=ms(1.25),
            graph_note="CUDA graph capture failed: RuntimeError: cudaErrorStreamCaptureUnsupported",
            compile_ro_note="not requested (extra baselines off)",
        ),
    )
    assert (a.best_baseline, a.speedup_vs_best, a.graph_ms, a.eager_ms) == ("graph", 2.0, 2.0, 4.0)
    assert b.best_baseline == "eager" and b.speedup_vs_graph is None
    assert b.baseline_notes[0].startswith("CUDA graph: CUDA graph capture failed")
    s = summarise([a, b])
    assert math.isclose(s.geomean_vs_best or 0, math.sqrt(2.0 * 0.8))
    assert s.below_best == 1
    assert math.isclose(s.geomean_vs_graph or 0, 2.0)  # over the problems that have the column
    assert math.isclose(s.geomean_graph_vs_eager or 0, 2.0)
    assert math.isclose(s.geomean_best_vs_eager or 0, math.sqrt(2.0 * 1.0))
    text = markdown(
        BenchReport(folder="f", coder="builtin", devices=[], date="d", rows=[a, b], summary=s)
    )
    assert "| a | yes | yes | 4.000x | 3.000x | 2.000x | 2.500x | 2.000x (CUDA graph) |" in text
    assert "| b | yes | yes | 0.800x | 1.280x | - | - | 0.800x (eager) |" in text
    assert "CUDA graph capture failed" in text
    assert "(1 correct problem(s) below 1.0x of their best)" in text
