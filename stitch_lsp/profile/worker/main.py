"""The profile worker (`profile.worker.main`): a `ProfileRequest` or a `ReportRequest` in,
a `ProfileRun` out.

It runs ncu (which runs the profiled program) or reads an existing report, in its own process
group: a cancel ends ncu and the profiled program with it, and nothing native (`ncu_report`) or
GPU-bound ever runs inside the server process.
"""

from __future__ import annotations

import sys
import time

from stitch_lsp.models.profile import (
    ProfileErrorKind,
    ProfileRequest,
    ProfileRun,
    ProfileWorkerRequest,
    ReportRequest,
)
from stitch_lsp.workers.entry import read_request


def read_only(path: str, ncu_path: str | None = None) -> ProfileRun:
    from stitch_lsp.profile.worker.report import ReportError, load_report

    t0 = time.perf_counter()
    try:
        report = load_report(path, ncu_path)
    except ReportError as exc:
        return ProfileRun(ok=False, error_kind=ProfileErrorKind.failed, error=str(exc))
    return ProfileRun(ok=True, report_path=path, report=report, wall_s=time.perf_counter() - t0)


def handle(request: ProfileRequest | ReportRequest) -> ProfileRun:
    if isinstance(request, ReportRequest):
        return read_only(request.report, request.ncu_path)
    from stitch_lsp.profile.worker.measure import run_profile

    return run_profile(request)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    request, out = read_request(args, ProfileWorkerRequest, "stitch_lsp.profile.worker.main")
    out.save(handle(request.root))
    return 0
