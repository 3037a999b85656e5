"""The loop's Verifier: `stitch_lsp.verify` (static checks, build, correctness, timing, exploit
checks, in a worker), then ncu when the Coder needs performance feedback.

It turns the Verifier's `VerifyResult` (and a profile) into the `Verdict` the Coder is given. The
candidate is written to a private temporary folder, never next to the user's files.
"""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

from stitch_lsp.config import Settings
from stitch_lsp.models.agents import Verdict
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import VerifyResult

_PROFILE_HINTS = 4


def summarize_correctness(result: object) -> str | None:
    """One or two sentences on the first failing trial of a `CorrectnessReport`."""
    rep = getattr(result, "correctness", None)
    if rep is None or rep.passed:
        return None
    parts: list[str] = []
    if rep.inputs_mutated:
        parts.append("the candidate modified its inputs")
    bad = [t for t in rep.trials if not t.passed]
    if bad:
        t = bad[0]
        s = f"{len(bad)} of {len(rep.trials)} trials failed; trial {t.index}"
        if len(rep.trials) > 1 or t.output:
            s += f" (output {t.output})"
        if t.message:
            s += f": {t.message}"
        if t.mismatches:
            tol = f"atol={rep.atol:g}, rtol={rep.rtol:g}"
            s += f"; {t.mismatches} of {t.numel} elements outside {tol}"
        if t.max_abs_error is not None:
            s += f"; max abs error {t.max_abs_error:.3g}"
        if t.first_mismatch is not None:
            s += f"; first at index {t.first_mismatch}"
            if t.expected is not None and t.actual is not None:
                s += f": expected {t.expected:.6g}, got {t.actual:.6g}"
        if t.unwritten:
            s += f"; {t.unwritten} elements were never written"
        parts.append(s)
    return "; ".join(parts) or "outputs differ from the reference"


def to_verdict(result: VerifyResult, *, compile_only: bool) -> Verdict:
    """Map the Verifier's `VerifyResult` to the `Verdict` the Coder is given."""
    status = result.status.value
    diagnostics: list[Finding] = []
    seen: set[tuple[str, int, str]] = set()
    for d in result.diagnostics:
        key = (d.code, d.line, d.message)
        if key not in seen:
            seen.add(key)
            diagnostics.append(d)
    message = result.message or ""
    for ex in getattr(result, "exploits", []) or []:
        diagnostics.append(
            Finding(
                path="candidate.py",
                line=1,
                severity=Severity.error,
                code=ex.code,
                message=ex.message,
            )
        )
    build = getattr(result, "build", None)
    if compile_only and status in {"passed", "no_gpu"}:
        # compile-only: the worker built the candidate and stopped before running it
        if build is not None and build.kind != "none":
            status = "compiled"
        else:
            status, message = "rejected", "nothing was built: the candidate carries no CUDA"
    timing = getattr(result, "timing", None)
    shares = getattr(result, "attribution", None)
    return Verdict(
        status=status,
        message=message,
        diagnostics=diagnostics,
        correctness=summarize_correctness(result),
        speedup=getattr(result, "speedup_vs_eager", None),
        speedup_vs_compile=getattr(result, "speedup_vs_compile", None),
        eager_ms=timing.eager.median if timing and timing.eager else None,
        candidate_ms=timing.candidate.median if timing and timing.candidate else None,
        speedup_vs_best=getattr(result, "speedup_vs_best", None),
        best_baseline=getattr(result, "best_baseline", None),
        timeline="\n".join(
            t
            for t in (
                describe_timelines(getattr(result, "timeline", None)),
                describe_attribution(shares),
            )
            if t
        )
        or None,
        compile_s=build.seconds if build else None,
        custom_share=shares.own if shares is not None and shares.gpu_ms > 0 else None,
        attribution=describe_attribution(shares) if shares is not None else None,
    )


def describe_attribution(shares: object) -> str | None:
    """The attribution line (`custom kernels: 18% of GPU time ...`), or None."""
    from stitch_lsp.models.verify import Attribution
    from stitch_lsp.verify.attribution import describe

    return describe(shares) if isinstance(shares, Attribution) and shares.gpu_ms > 0 else None


def describe_timelines(report: object) -> str | None:
    """The candidate's and the reference's timelines as the Coder reads them."""
    from stitch_lsp.verify.timeline import advice, describe, describe_top

    if report is None:
        return None
    lines = []
    for label, t in (
        ("yours", getattr(report, "candidate", None)),
        ("reference", getattr(report, "reference", None)),
    ):
        if t is None:
            continue
        lines.append(f"{label}: {describe(t)}")
        lines += [f"  {k}" for k in describe_top(t)]
        hint = advice(t)
        if hint and label == "yours":
            lines.append(f"  -> {hint}")
    return "\n".join(lines) or None


def profile_candidate(
    path: Path,
    settings: Settings,
    *,
    cancel: threading.Event | None = None,
    device: str | None = None,
    llm_code: bool = False,
    reference: Path | None = None,
) -> tuple[str | None, list[str]]:
    """ncu on the candidate's own kernels: a one-line summary and the top hints (or why not).

    It runs in the profile worker, like every profile: ncu_report is native code and never
    loads in the calling process (which may be the language server)."""
    from stitch_lsp.models.profile import ProfileRequest
    from stitch_lsp.profile.client import run_profile
    from stitch_lsp.profile.summary import summarize
    from stitch_lsp.workers.launch import WorkerError

    timeout_s = min(settings.verify_timeout_s, 300.0)
    request = ProfileRequest(
        path=str(path),
        class_name="ModelNew",
        ncu_path=settings.ncu_path,
        sections=list(settings.ncu_sections),
        full_set=settings.ncu_full_set,
        launch_count=4,
        python=settings.python_for_workers,
        timeout_s=timeout_s,
    )
    try:
        run = run_profile(
            request,
            timeout_s=timeout_s + 60,
            sandbox=settings.sandbox,
            device=device,
            cancel=cancel,
            llm_code=llm_code,
            readable=(Path(reference).resolve(),) if reference else (),
        )
    except WorkerError as exc:
        return f"not profiled: {exc.message}", []
    if not run.ok or run.report is None or not run.report.kernels:
        return f"not profiled: {run.error or 'no kernels in the report'}", []
    kernels = sorted(run.report.kernels, key=lambda k: -(k.duration_ns or 0.0))
    hints: list[str] = []
    lines = []
    for s in (summarize(k) for k in kernels[:3]):
        us = f"{s.duration_us:.1f} us" if s.duration_us else "?"
        lines.append(f"{s.name} {us}, {s.bottleneck}-bound ({s.bottleneck_reason})")
        hints += [f"{s.name}: {h}" for h in s.hints[:2]]
    return "; ".join(lines), hints[:_PROFILE_HINTS]


class StitchVerifier:
    """`stitch_lsp.verify.verify` as the loop's `Verifier`, and ncu as its `Profiler`.

    The loop compares with eager PyTorch (its stop rule), so attempts skip the torch.compile
    baseline by default: on the H200 that timing alone took about 9 s of each verification.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        device: str | None = None,
        compare_compile: bool = False,
        llm_code: bool = False,
    ) -> None:
        self.settings = settings
        self.device = device
        self.compare_compile = compare_compile
        self.llm_code = llm_code
        """The candidates come from an LLM: they run only in the sandbox (unless mode none)."""

    def __call__(
        self, reference: Path, candidate: str, *, compile_only: bool, cancel: threading.Event
    ) -> Verdict:
        from stitch_lsp.verify import verify

        with tempfile.TemporaryDirectory(prefix="stitch-candidate-") as tmp:
            path = Path(tmp) / "candidate.py"
            path.write_text(candidate, encoding="utf-8")
            result = verify(
                reference,
                path,
                self.settings,
                device=self.device,
                compile_only=compile_only,
                cancel=cancel,
                compare_compile=self.compare_compile,
                llm_code=self.llm_code,
            )
            verdict = to_verdict(result, compile_only=compile_only)
        for d in verdict.diagnostics:
            if Path(d.path).name == path.name or d.path == str(path):
                d.path = "candidate.py"
        return verdict

    def profile(
        self, reference: Path, candidate: str, *, cancel: threading.Event
    ) -> tuple[str | None, list[str]]:
        """ncu on the candidate's kernels: a summary line and the top hints."""
        if cancel.is_set():
            return None, []
        with tempfile.TemporaryDirectory(prefix="stitch-profile-") as tmp:
            path = Path(tmp) / "candidate.py"
            path.write_text(with_reference_inputs(candidate, reference), encoding="utf-8")
            return profile_candidate(
                path,
                self.settings,
                cancel=cancel,
                device=self.device,
                llm_code=self.llm_code,
                reference=reference,
            )


def with_reference_inputs(candidate: str, reference: Path) -> str:
    """The profiler runs one file: borrow `get_inputs`/`get_init_inputs` from the reference.

    Appended at the end, so the candidate's own line numbers (and ncu's line info) stay as
    they are.
    """
    if re.search(r"^def get_inputs\b", candidate, re.M) and re.search(
        r"^def get_init_inputs\b", candidate, re.M
    ):
        return candidate
    ref = str(Path(reference).resolve())
    return candidate.rstrip("\n") + (
        "\n\n\n# Inputs borrowed from the reference for profiling.\n"
        "import importlib.util as _stitch_util\n\n"
        f"_stitch_spec = _stitch_util.spec_from_file_location('stitch_reference', {ref!r})\n"
        "_stitch_ref = _stitch_util.module_from_spec(_stitch_spec)\n"
        "_stitch_spec.loader.exec_module(_stitch_ref)\n"
        "get_inputs = _stitch_ref.get_inputs\n"
        "get_init_inputs = _stitch_ref.get_init_inputs\n"
    )
