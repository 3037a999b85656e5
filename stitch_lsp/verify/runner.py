"""Server-side half of the Verifier: static checks, then one worker process per candidate.

Torch-free. The worker runs in its own session (process group) so a timeout or a cancel kills
the candidate and anything it spawned; the request and the result travel as JSON files (the
candidate owns stdout and stderr, which we keep only as a log tail).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from stitch_lsp.config import Settings
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import VerifyRequest, VerifyResult, VerifyStatus
from stitch_lsp.verify.devices import visible_gpus

LOG_TAIL_CHARS = 6000
KILL_GRACE_S = 5.0


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
) -> VerifyResult:
    """Verify `candidate` (its ModelNew) against `reference` (its Model). Never raises for a bad
    candidate: every outcome is a VerifyResult with a status. `extra_baselines` None: the
    setting decides."""
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
    statics = static_findings(reference, candidate, settings) or []
    errors = [f for f in statics if f.severity is Severity.error]
    if errors:
        return VerifyResult(
            status=VerifyStatus.exploit,
            message=f"static checks: {errors[0].code}: {errors[0].message}",
            reference=str(reference),
            candidate=str(candidate),
            diagnostics=statics,
            wall_seconds=time.perf_counter() - start,
            phase="static",
        )

    gpus = visible_gpus()
    chosen = device or settings.device
    env = dict(os.environ)
    worker_device: str | None = None
    if not compile_only and gpus:
        chosen = chosen or gpus[0]
        if chosen not in gpus:
            return VerifyResult(
                status=VerifyStatus.runtime_error,
                message=f"device {chosen} is not visible here (visible: {', '.join(gpus)})",
                reference=str(reference),
                candidate=str(candidate),
                diagnostics=statics,
            )
        index = int(chosen.split(":", 1)[1]) if ":" in chosen else 0
        env["CUDA_VISIBLE_DEVICES"] = _physical_index(index)
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
    python = settings.python_for_workers or sys.executable
    result = run_worker(
        request,
        python=python,
        env=env,
        timeout_s=timeout_s or settings.verify_timeout_s,
        cancel=cancel,
        cwd=candidate.parent,
    )
    result.device = worker_device and chosen
    result.diagnostics = statics + result.diagnostics
    result.wall_seconds = time.perf_counter() - start
    return result


def _physical_index(index: int) -> str:
    """cuda:K of this process -> the CUDA_VISIBLE_DEVICES entry the worker must see."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        if 0 <= index < len(entries):
            return entries[index]
    return str(index)


def run_worker(
    request: VerifyRequest,
    *,
    python: str,
    env: dict[str, str],
    timeout_s: float,
    cancel: threading.Event | None = None,
    cwd: Path | None = None,
) -> VerifyResult:
    """Run one worker process; turn every way it can end into a VerifyResult."""
    with tempfile.TemporaryDirectory(prefix="stitch-verify-") as tmp:
        req_path = Path(tmp) / "request.json"
        res_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "worker.log"
        req_path.write_text(request.model_dump_json())
        env = dict(env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # The worker imports stitch_lsp from wherever this process found it.
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
        started = time.perf_counter()
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(
                    [python, "-m", "stitch_lsp.verify.worker", str(req_path), str(res_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=str(cwd) if cwd else None,
                    start_new_session=True,
                )
            except OSError as exc:
                return VerifyResult(
                    status=VerifyStatus.runtime_error,
                    message=f"cannot start the worker ({python}): {exc}",
                    reference=request.reference,
                    candidate=request.candidate,
                )
            ended = _wait(proc, timeout_s, cancel)
        elapsed = time.perf_counter() - started
        log_tail = _tail(log_path)
        result = _read_result(res_path, request)
        result.log_tail = (result.log_tail + "\n" + log_tail).strip()[-LOG_TAIL_CHARS:]
        finished = result.phase == "done"
        if ended == "timeout":
            result.status = VerifyStatus.timeout
            result.message = (
                f"timed out after {timeout_s:.0f} s in phase '{result.phase}' "
                "(hung kernel or endless loop?); the worker was killed"
            )
        elif ended == "cancelled":
            result.status = VerifyStatus.runtime_error
            result.message = "cancelled"
        elif not finished:
            code = proc.returncode
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            result.status = VerifyStatus.runtime_error
            result.message = (
                f"the worker {how} during phase '{result.phase}' (crash, os._exit or fault "
                "in the candidate)"
            )
        if ended != "exited" or not finished:
            result.diagnostics.append(
                Finding(
                    path=request.candidate,
                    line=1,
                    severity=Severity.error,
                    code=f"stitch.{result.status.value.replace('_', '-')}",
                    message=result.message,
                    source="stitch-verify",
                )
            )
        result.wall_seconds = elapsed
        return result


def _wait(proc: subprocess.Popen[bytes], timeout_s: float, cancel: threading.Event | None) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=0.1)
            _kill_group(proc)  # anything the candidate left running in its group
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        if cancel is not None and cancel.is_set():
            _kill_group(proc)
            return "cancelled"
        if time.monotonic() > deadline:
            _kill_group(proc)
            return "timeout"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - LOG_TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_result(path: Path, request: VerifyRequest) -> VerifyResult:
    try:
        return VerifyResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return VerifyResult(
            status=VerifyStatus.runtime_error,
            message="the worker wrote no result",
            reference=request.reference,
            candidate=request.candidate,
            phase="start",
        )
