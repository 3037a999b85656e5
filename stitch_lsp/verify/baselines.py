"""The baselines a candidate is timed against, and the best of them. No torch here.

Eager PyTorch and torch.compile always (unless switched off); with extra baselines also the
reference replayed under a CUDA graph (input copy and fresh output included) and
torch.compile(mode="reduce-overhead"). A column that could not be measured carries a note and
is left out of "best": the best is the fastest of what was measured, never a guess.
"""

from __future__ import annotations

from stitch_lsp.models.verify import TimingReport, VerifyResult

LABELS: dict[str, str] = {
    "eager": "eager",
    "graph": "CUDA graph",
    "compile": "torch.compile",
    "compile-ro": "torch.compile reduce-overhead",
}


def baseline_times(timing: TimingReport) -> dict[str, float]:
    """Median ms of every baseline that was measured, by name."""
    columns = {
        "eager": timing.eager,
        "graph": timing.graph,
        "compile": timing.compiled,
        "compile-ro": timing.compiled_ro,
    }
    return {k: s.median for k, s in columns.items() if s is not None and s.median > 0}


def best_baseline(timing: TimingReport) -> tuple[str, float] | None:
    """The fastest measured baseline (ties go to the simpler one, in LABELS order)."""
    times = baseline_times(timing)
    if not times:
        return None
    name = min(times, key=lambda k: (times[k], list(LABELS).index(k)))
    return name, times[name]


def apply_speedups(result: VerifyResult) -> None:
    """Fill the result's speedups from its timing (reference median / candidate median)."""
    t = result.timing
    if t is None or t.candidate is None or t.candidate.median <= 0:
        return
    cand = t.candidate.median
    times = baseline_times(t)
    result.speedup_vs_eager = times["eager"] / cand if "eager" in times else None
    result.speedup_vs_compile = times["compile"] / cand if "compile" in times else None
    result.speedup_vs_graph = times["graph"] / cand if "graph" in times else None
    result.speedup_vs_compile_ro = times["compile-ro"] / cand if "compile-ro" in times else None
    best = best_baseline(t)
    if best is not None:
        result.best_baseline, ms = best
        result.speedup_vs_best = ms / cand


def missing_notes(timing: TimingReport) -> list[str]:
    """Why each missing column is missing, as `label: why`."""
    notes = []
    for label, stats, note in (
        ("torch.compile", timing.compiled, timing.compile_note),
        ("CUDA graph", timing.graph, timing.graph_note),
        ("reduce-overhead", timing.compiled_ro, timing.compile_ro_note),
    ):
        if stats is None and note:
            notes.append(f"{label}: {note}")
    return notes
