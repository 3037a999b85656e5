"""What a verify result says in the terminal, the lens and the hover (pure, no GPU)."""

from __future__ import annotations

from stitch_lsp.models.verify import (
    CorrectnessReport,
    KernelShare,
    PrecisionReport,
    PrecisionTrial,
    Timeline,
    TimelineReport,
    TimingReport,
    TimingStats,
    VerifyResult,
    VerifyStatus,
)
from stitch_lsp.verify.baselines import apply_speedups
from stitch_lsp.verify.report import hover_markdown, render


def ms(v: float) -> TimingStats:
    return TimingStats(median=v, mean=v, std=0.0, min=v, max=v, n=10)


def timeline(kernels: float, busy: float) -> Timeline:
    return Timeline(
        forwards=3,
        kernels=kernels,
        window_ms=1.0,
        busy_ms=busy,
        busy_fraction=busy,
        gaps=2,
        gap_ms=1 - busy,
        max_gap_ms=0.1,
        host_ms=0.2,
        top=[KernelShare(name="gemm", ms=busy * 0.8, calls=1, share=0.8)],
    )


def result() -> VerifyResult:
    r = VerifyResult(
        status=VerifyStatus.passed,
        correctness=CorrectnessReport(
            passed=True,
            atol=1e-4,
            rtol=1e-4,
            precision=PrecisionReport(
                factor=128,
                floor=1,
                trials=[
                    PrecisionTrial(
                        inputs="signs",
                        candidate_error=2e-5,
                        reference_error=1e-5,
                        candidate_tol_units=0.2,
                        reference_tol_units=0.1,
                        ratio=2.0,
                    )
                ],
                skipped=["range: the fp32 reference gives non-finite outputs"],
            ),
        ),
        timing=TimingReport(
            eager=ms(2.0),
            compiled=ms(1.9),
            graph=ms(1.25),
            candidate=ms(1.0),
            compile_ro_note="torch.compile(mode='reduce-overhead') failed: boom",
        ),
        timeline=TimelineReport(reference=timeline(12, 0.5), candidate=timeline(2, 0.95)),
    )
    apply_speedups(r)
    return r


def test_terminal_report_shows_columns_oracle_and_timelines() -> None:
    text = render(result())
    assert "CUDA graph     1.2500 ms" in text
    assert "compile r-o    - (torch.compile(mode='reduce-overhead') failed: boom)" in text
    assert "2.000x vs eager, 1.900x vs torch.compile, 1.250x vs CUDA graph" in text
    assert "vs the best baseline (CUDA graph): 1.250x" in text
    assert "float64 oracle (1 comparisons): ok; largest ratio 2.0x on signs" in text
    assert "skipped range: the fp32 reference gives non-finite outputs" in text
    assert "reference  12 kernels, GPU busy 50% of 1.000 ms" in text
    assert "candidate  2 kernels, GPU busy 95% of 1.000 ms" in text


def test_lens_title_and_hover() -> None:
    from stitch_lsp.server.features.verify import result_title

    r = result()
    title = result_title(r)
    assert title == (
        "✓ passed · 2.00x vs eager · 1.90x vs torch.compile · 1.25x vs best (CUDA graph)"
        " · 2 kernels, GPU 95% busy"
    )
    md = hover_markdown(r, title)
    assert md.startswith(f"**Verifier** · {title}")
    assert "| CUDA graph (best) | 1.2500 | 1.25x |" in md
    assert "*reduce-overhead: torch.compile(mode='reduce-overhead') failed: boom*" in md
    assert "Reference timeline: 12 kernels" in md and "Top: gemm" in md
