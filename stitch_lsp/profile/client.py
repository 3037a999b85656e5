"""Server-side half of the profiler: the profile worker's one call, for every caller.

Torch-free, and ncu_report-free: the report is read in the worker (`stitch_lsp.profile.worker`),
so the native reader never loads in the language server. The editor, the CLI and the loop's
Profiler each keep their own time limit (`timeout_s`) and their own words for a failure.
"""

from __future__ import annotations

import threading
from pathlib import Path

from stitch_lsp.gpus import inventory
from stitch_lsp.models.profile import ProfileRequest, ProfileRun, ReportRequest
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import WorkerCall, WorkerLauncher, run_worker

LABEL = "the profile worker"


def profile_call(
    request: ProfileRequest | ReportRequest,
    *,
    timeout_s: float,
    sandbox: str | None,
    device: str | None = None,
    llm_code: bool = False,
    readable: tuple[Path, ...] = (),
) -> WorkerCall[ProfileRun]:
    """The profile worker's call. `timeout_s` is the whole run's limit (ncu's own limit sits in
    a ProfileRequest; the worker needs some time beyond it to build and read the report).
    `device` (cuda:K) is the one GPU it sees; None leaves the GPUs as they are."""
    env = {"CUDA_VISIBLE_DEVICES": inventory().physical(device)} if device else {}
    return WorkerCall(
        module=WORKER_ENTRY_POINTS["profile"],
        request=request,
        result=ProfileRun,
        timeout_s=timeout_s,
        env=env,
        label=LABEL,
        sandbox=sandbox,
        llm_code=llm_code,
        readable=readable,
    )


def run_profile(
    request: ProfileRequest | ReportRequest,
    *,
    timeout_s: float,
    sandbox: str | None,
    device: str | None = None,
    cancel: threading.Event | None = None,
    launcher: WorkerLauncher | None = None,
    llm_code: bool = False,
    readable: tuple[Path, ...] = (),
) -> ProfileRun:
    """Run `profile_call` to the end; WorkerError when the worker gives no result (each caller
    tells its user about that in its own way)."""
    call = profile_call(
        request,
        timeout_s=timeout_s,
        sandbox=sandbox,
        device=device,
        llm_code=llm_code,
        readable=readable,
    )
    return run_worker(call, cancel, launcher).result
