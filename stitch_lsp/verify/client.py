"""Server-side half of the Verifier: static checks, then one worker process per candidate.

Torch-free. The worker goes through the one launcher (`stitch_lsp.workers.launch`): its own
process group, so a timeout or a cancel kills the candidate and anything it spawned; the
request and the result travel as JSON files (the candidate owns stdout and stderr, which we keep
only as a log tail).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stitch_lsp.config import Settings
from stitch_lsp.gpus import inventory, visible_gpus
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import (
    WorkerCall,
    WorkerError,
    WorkerErrorKind,
    WorkerLauncher,
    is_remote,
)
from stitch_lsp.workers.launch import run_worker as run_launched

LOG_TAIL_CHARS = 6000


def static_findings(reference: Path, candidate: Path, settings: Settings) -> list[Finding] | None:
    """The static checks' findings on the candidate; None when the analysis is unavailable."""
    try:
        from stitch_lsp.analysis import check_paths
    except ImportError:
        return None
    paths = [candidate] if reference == candidate else [reference, candidate]
    try:
        report = check_paths(paths, settings)
    except Exception as exc:
        return [
            Finding(
                path=str(candidate),
                line=1,
                severity=Severity.warning,
                code="stitch.verify.static-check-failed",
                message=f"static checks could not run: {type(exc).__name__}: {exc}",
                source="stitch-verify",
            )
        ]
    cand = str(candidate)
    return [d for d in report.diagnostics if Path(d.path).resolve() == Path(cand).resolve()]


def verify(
    reference: Path,
    candidate: Path,
    settings: Settings,
    *,
    device: str | None = None,
    compile_only: bool = False,
    cancel: threading.Event | None = None,
    trials: int | None = None,
    timeout_s: float | None = None,
    compare_compile: bool = True,
    exploit_checks: bool = True,
    extra_baselines: bool | None = None,
    launcher: WorkerLauncher | None = None,
    progress: Callable[[str], None] | None = None,
    llm_code: bool = False,
) -> VerifyResult:
    """Verify `candidate` (its ModelNew) against `reference` (its Model). Never raises for a bad
    candidate: every outcome is a VerifyResult with a status. `extra_baselines` None: the
    setting decides. `llm_code`: the candidate came from an LLM, so it runs only in the
    sandbox unless the user set `stitch.sandbox` to none. `progress` hears each stage as it
    starts (static checks, then the worker's phases: import, build, correctness, ...)."""
    say = progress or (lambda _stage: None)
    start = time.perf_counter()
    reference = Path(reference).resolve()
    candidate = Path(candidate).resolve()
    for p in (reference, candidate):
        if not p.is_file():
            return VerifyResult(
                status=VerifyStatus.runtime_error,
                message=f"no such file: {p}",
                reference=str(reference),
                candidate=str(candidate),
            )
    say("static checks")
    statics = static_findings(reference, candidate, settings) or []
    errors = [f for f in statics if f.severity is Severity.error]
    if errors:
        # A file that does not parse is a compile error, not a cheat.
        broken = next((f for f in errors if f.code == "stitch.parse-error"), None)
        first = broken or errors[0]
        return VerifyResult(
            status=VerifyStatus.compile_error if broken else VerifyStatus.exploit,
            message=f"static checks: {first.code}: {first.message}",
            reference=str(reference),
            candidate=str(candidate),
            diagnostics=statics,
            wall_seconds=time.perf_counter() - start,
            phase="static",
        )

    gpus = [] if is_remote(launcher) else visible_gpus()
    chosen = device or settings.device
    env: dict[str, str] = {}
    worker_device: str | None = None
    if not compile_only and is_remote(launcher):
        # A cluster: the launcher gives the worker one of its GPUs (as cuda:0) and says which.
        worker_device = "cuda:0"
    elif not compile_only and gpus:
        chosen = chosen or gpus[0]
        if chosen not in gpus:
            return VerifyResult(
                status=VerifyStatus.runtime_error,
                message=f"device {chosen} is not visible here (visible: {', '.join(gpus)})",
                reference=str(reference),
                candidate=str(candidate),
                diagnostics=statics,
            )
        env["CUDA_VISIBLE_DEVICES"] = inventory().physical(chosen)
        worker_device = "cuda:0"
    else:
        # No GPU (or a compile-only request): hide every GPU so the worker only builds.
        env["CUDA_VISIBLE_DEVICES"] = ""
    request = VerifyRequest(
        reference=str(reference),
        candidate=str(candidate),
        device=worker_device,
        compile_only=compile_only,
        trials=trials or settings.trials,
        timing_trials=settings.timing_trials,
        allow_tf32=settings.allow_tf32,
        compare_compile=compare_compile,
        extra_baselines=settings.extra_baselines if extra_baselines is None else extra_baselines,
        exploit_checks=exploit_checks,
    )
    say("starting the worker" + (f" on {chosen}" if worker_device else " (build only)"))
    result = run_worker(
        request,
        python=settings.python_for_workers,
        env=env,
        timeout_s=timeout_s or settings.verify_timeout_s,
        cancel=cancel,
        cwd=candidate.parent,
        launcher=launcher,
        progress=progress,
        sandbox=settings.sandbox,
        llm_code=llm_code,
    )
    if not is_remote(launcher):
        result.device = worker_device and chosen
    result.diagnostics = statics + result.diagnostics
    result.wall_seconds = time.perf_counter() - start
    return result


def run_worker(
    request: VerifyRequest,
    *,
    python: str | None,
    env: dict[str, str] | None = None,
    timeout_s: float,
    cancel: threading.Event | None = None,
    cwd: Path | None = None,
    launcher: WorkerLauncher | None = None,
    progress: Callable[[str], None] | None = None,
    sandbox: str | None = None,
    llm_code: bool = False,
) -> VerifyResult:
    """Run one verify worker; turn every way it can end into a VerifyResult.

    `env` holds overrides of the worker environment (CUDA_VISIBLE_DEVICES). The worker runs in
    the candidate's folder (relative `load(sources=...)` paths resolve as in a script run from
    there), but that folder is never on its import path. `progress` hears each phase the
    worker enters, in words (`PHASES`).
    """
    call = WorkerCall(
        module=WORKER_ENTRY_POINTS["verify"],
        request=request,
        result=VerifyResult,
        timeout_s=timeout_s,
        python=python,
        env=env or {},
        cwd=cwd,
        label="the verify worker",
        on_partial=_phase_reporter(progress) if progress is not None else None,
        sandbox=sandbox,
        llm_code=llm_code,
    )
    try:
        reply = run_launched(call, cancel, launcher)
    except WorkerError as exc:
        return _failed(request, exc, timeout_s)
    result = reply.result
    result.log_tail = (result.log_tail + "\n" + reply.log_tail).strip()[-LOG_TAIL_CHARS:]
    if result.phase != "done":  # the candidate ended the process itself (os._exit(0))
        result.status = VerifyStatus.runtime_error
        result.message = (
            f"the worker exited with code 0 during phase '{result.phase}' (crash, os._exit or "
            "fault in the candidate)"
        )
        result.diagnostics.append(_run_finding(request, result))
    result.wall_seconds = reply.seconds
    result.sandbox = reply.sandbox
    if reply.where:
        result.device = reply.where
    return result


def _failed(request: VerifyRequest, exc: WorkerError, timeout_s: float) -> VerifyResult:
    """A worker that did not finish: say how far it got, from the result it saved last."""
    partial = exc.partial if isinstance(exc.partial, VerifyResult) else None
    result = partial or VerifyResult(
        status=VerifyStatus.runtime_error,
        message="the worker wrote no result",
        reference=request.reference,
        candidate=request.candidate,
        phase="start",
    )
    result.log_tail = (result.log_tail + "\n" + exc.log_tail).strip()[-LOG_TAIL_CHARS:]
    if exc.kind is WorkerErrorKind.timeout:
        result.status = VerifyStatus.timeout
        result.message = (
            f"timed out after {timeout_s:.0f} s in phase '{result.phase}' "
            "(hung kernel or endless loop?); the worker was killed"
        )
    elif exc.kind is WorkerErrorKind.cancelled:
        result.status = VerifyStatus.runtime_error
        result.message = "cancelled"
    elif exc.kind is WorkerErrorKind.cannot_start:
        result.status = VerifyStatus.runtime_error
        result.message = exc.message.replace("the verify worker", "the worker")
    elif exc.kind is WorkerErrorKind.no_result:
        result.status = VerifyStatus.runtime_error
        result.message = (
            f"the worker exited normally during phase '{result.phase}' but "
            f"{exc.message.removeprefix('the verify worker ')}"
        )
    else:
        code = exc.returncode or 0
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        result.status = VerifyStatus.runtime_error
        result.message = (
            f"the worker {how} during phase '{result.phase}' (crash, os._exit or fault "
            "in the candidate)"
        )
    result.diagnostics.append(_run_finding(request, result))
    result.wall_seconds = exc.seconds
    return result


def _run_finding(request: VerifyRequest, result: VerifyResult) -> Finding:
    return Finding(
        path=request.candidate,
        line=1,
        severity=Severity.error,
        code=f"stitch.{result.status.value.replace('_', '-')}",
        message=result.message,
        source="stitch-verify",
    )


PHASES = {
    "import": "importing the reference and the candidate",
    "build": "building",
    "correctness": "checking correctness",
    "exploits": "checking for exploits",
    "timing": "timing against the baselines",
    "done": "done",
}


def _phase_reporter(progress: Callable[[str], None]) -> Callable[[dict[str, Any]], None]:
    """The worker saves its result at every phase: each new phase in it, told once, in words."""
    seen = {"phase": "start"}

    def partial(data: dict[str, Any]) -> None:
        phase = data.get("phase")
        if isinstance(phase, str) and phase != seen["phase"]:
            seen["phase"] = phase
            progress(PHASES.get(phase, phase))

    return partial
