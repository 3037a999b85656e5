"""How the Verifier's results become the Coder's feedback, and the profiler's input shim."""

from __future__ import annotations

from pathlib import Path

from stitch_lsp.agents.coder import format_feedback
from stitch_lsp.agents.verifier import to_verdict, with_reference_inputs
from stitch_lsp.models.verify import (
    BuildInfo,
    CorrectnessReport,
    TimingReport,
    TimingStats,
    TrialResult,
    VerifyResult,
    VerifyStatus,
)


def _stats(ms: float) -> TimingStats:
    return TimingStats(median=ms, mean=ms, std=0.0, min=ms, max=ms, n=20)


def test_compile_only_build_is_compiled_and_nothing_built_is_rejected():
    built = VerifyResult(status=VerifyStatus.no_gpu, build=BuildInfo(kind="fastcuda", seconds=1.2))
    v = to_verdict(built, compile_only=True)
    assert v.status == "compiled" and v.correct is None and v.compile_s == 1.2
    empty = VerifyResult(status=VerifyStatus.no_gpu, build=BuildInfo(kind="none"))
    assert to_verdict(empty, compile_only=True).status == "rejected"


def test_mismatch_and_timings_reach_the_feedback():
    wrong = VerifyResult(
        status=VerifyStatus.incorrect,
        message="outputs differ",
        correctness=CorrectnessReport(
            passed=False,
            atol=1e-4,
            rtol=1e-4,
            trials=[
                TrialResult(index=0, passed=True),
                TrialResult(
                    index=1,
                    passed=False,
                    mismatches=12,
                    numel=4096,
                    max_abs_error=0.5,
                    first_mismatch=[3, 7],
                    expected=1.0,
                    actual=0.5,
                    unwritten=4,
                ),
            ],
        ),
    )
    v = to_verdict(wrong, compile_only=False)
    assert v.status == "incorrect" and v.correct is False
    assert "1 of 2 trials failed; trial 1" in v.correctness
    assert "12 of 4096 elements outside atol=0.0001" in v.correctness
    assert "first at index [3, 7]: expected 1, got 0.5" in v.correctness
    assert "4 elements were never written" in v.correctness
    assert "Correctness: 1 of 2 trials failed" in format_feedback(v)

    fast = VerifyResult(
        status=VerifyStatus.passed,
        timing=TimingReport(eager=_stats(2.0), candidate=_stats(1.0)),
        speedup_vs_eager=2.0,
        speedup_vs_compile=1.5,
    )
    v = to_verdict(fast, compile_only=False)
    assert v.correct is True and v.speedup == 2.0
    assert "yours 1.0000 ms, PyTorch eager 2.0000 ms (speedup 2.00x; 1.50x vs torch.compile)" in (
        format_feedback(v)
    )


def test_profiler_borrows_the_reference_inputs(tmp_path: Path):
    ref = tmp_path / "ref.py"
    ref.write_text("def get_inputs():\n    return [1]\n\ndef get_init_inputs():\n    return [2]\n")
    cand = "class ModelNew:\n    pass\n"
    text = with_reference_inputs(cand, ref)
    assert text.startswith(cand)  # the candidate's lines stay where they were
    ns: dict = {}
    exec(compile(text, "candidate.py", "exec"), ns)
    assert ns["get_inputs"]() == [1] and ns["get_init_inputs"]() == [2]
    own = cand + "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"
    assert with_reference_inputs(own, ref) == own


def test_timeline_and_best_baseline_reach_the_optimize_prompt_and_the_planner():
    from stitch_lsp.agents.coder import CoderRequest, build_messages
    from stitch_lsp.agents.planner import describe_analysis, fallback_analysis, plan_from_analysis
    from stitch_lsp.models.agents import Attempt, CoderStage
    from stitch_lsp.models.verify import KernelShare, Timeline, TimelineReport

    def tl(kernels: float, busy: float) -> Timeline:
        return Timeline(
            forwards=3,
            kernels=kernels,
            window_ms=2.0,
            busy_ms=2.0 * busy,
            busy_fraction=busy,
            gaps=kernels,
            gap_ms=2.0 * (1 - busy),
            max_gap_ms=0.05,
            host_ms=1.9,
            top=[KernelShare(name="lstm_cell", ms=0.5, calls=kernels, share=0.4)],
        )

    passed = VerifyResult(
        status=VerifyStatus.passed,
        timing=TimingReport(eager=_stats(4.0), graph=_stats(1.5), candidate=_stats(2.0)),
        speedup_vs_eager=2.0,
        speedup_vs_best=0.75,
        best_baseline="graph",
        timeline=TimelineReport(candidate=tl(40, 0.3), reference=tl(120, 0.2)),
    )
    v = to_verdict(passed, compile_only=False)
    feedback = format_feedback(v)
    assert "0.75x vs the best baseline (graph)" in feedback
    assert "Timeline per forward (torch.profiler):" in feedback
    assert "yours: 40 kernels, GPU busy 30% of 2.000 ms" in feedback
    assert "reference: 120 kernels" in feedback
    assert "launch and host overhead dominate" in feedback
    analysis = fallback_analysis("test")
    analysis.timeline = tl(120, 0.2)
    text = describe_analysis(analysis)
    assert "timeline per forward: 120 kernels, GPU busy 20%" in text
    attempt = Attempt(index=1, stage=CoderStage.draft, coder="llm", code="x = 1", verdict=v)
    req = CoderRequest(
        stage=CoderStage.optimize_performance,
        attempt=2,
        reference_name="ref.py",
        reference="class Model: ...",
        plan=plan_from_analysis(analysis),
        previous=attempt,
    )
    user = build_messages(req)[1]["content"]
    assert "yours: 40 kernels" in user and "The timeline says where end-to-end time goes" in user
