"""Baseline columns: the best of those measured, speedups, and what a missing column says."""

from __future__ import annotations

import pytest

from stitch_lsp.models.verify import TimingReport, TimingStats, VerifyResult, VerifyStatus
from stitch_lsp.verify.baselines import apply_speedups, baseline_times, best_baseline, missing_notes
from stitch_lsp.verify.report import render


def ms(v: float) -> TimingStats:
    return TimingStats(median=v, mean=v, std=0.0, min=v, max=v, n=10)


def test_best_of_four_and_speedups() -> None:
    t = TimingReport(
        eager=ms(2.0), compiled=ms(1.8), graph=ms(1.2), compiled_ro=ms(1.5), candidate=ms(1.0)
    )
    assert best_baseline(t) == ("graph", 1.2)
    r = VerifyResult(status=VerifyStatus.passed, timing=t)
    apply_speedups(r)
    assert r.speedup_vs_eager == pytest.approx(2.0)
    assert r.speedup_vs_compile == pytest.approx(1.8)
    assert r.speedup_vs_graph == pytest.approx(1.2)
    assert r.speedup_vs_compile_ro == pytest.approx(1.5)
    assert r.best_baseline == "graph" and r.speedup_vs_best == pytest.approx(1.2)
    text = render(r)
    assert "1.200x vs CUDA graph" in text and "vs the best baseline (CUDA graph): 1.200x" in text


def test_a_column_that_failed_is_named_and_left_out_of_best() -> None:
    t = TimingReport(
        eager=ms(2.0),
        compiled=ms(2.5),
        candidate=ms(1.0),
        graph_note="CUDA graph capture failed: RuntimeError: operation not permitted",
        compile_ro_note="torch.compile(mode='reduce-overhead') failed: BackendCompilerFailed",
    )
    assert baseline_times(t) == {"eager": 2.0, "compile": 2.5}
    assert best_baseline(t) == ("eager", 2.0)
    r = VerifyResult(status=VerifyStatus.passed, timing=t)
    apply_speedups(r)
    assert r.speedup_vs_graph is None and r.speedup_vs_compile_ro is None
    assert r.best_baseline == "eager" and r.speedup_vs_best == pytest.approx(2.0)
    notes = missing_notes(t)
    assert notes[0].startswith("CUDA graph: CUDA graph capture failed") and len(notes) == 2
    assert "(CUDA graph capture failed" in render(r)


def test_ties_go_to_the_simpler_baseline_and_nothing_measured_gives_none() -> None:
    assert best_baseline(TimingReport(eager=ms(1.0), graph=ms(1.0))) == ("eager", 1.0)
    assert best_baseline(TimingReport()) is None
    r = VerifyResult(status=VerifyStatus.passed, timing=TimingReport(eager=ms(1.0)))
    apply_speedups(r)  # no candidate time: nothing to divide
    assert r.speedup_vs_eager is None and r.speedup_vs_best is None


def test_result_with_new_fields_round_trips() -> None:
    t = TimingReport(eager=ms(2.0), graph=ms(1.0), candidate=ms(1.0), tf32=False)
    r = VerifyResult(status=VerifyStatus.passed, timing=t)
    apply_speedups(r)
    again = VerifyResult.model_validate_json(r.model_dump_json())
    assert again.best_baseline == "graph" and again.timing and again.timing.graph == ms(1.0)
