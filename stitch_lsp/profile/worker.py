"""`python -m stitch_lsp.profile.worker`: a `ProfileRequest` as JSON on stdin, a `ProfileRun` out.

`--read REPORT` skips profiling and answers a `ProfileRun` for an existing report. The server
starts this in its own process group, so a cancel kills ncu and the profiled program with it,
and nothing native (ncu_report) or GPU-bound ever runs inside the server process.
"""

from __future__ import annotations

import argparse
import sys
import time

from pydantic import ValidationError

from stitch_lsp.models.profile import ProfileErrorKind, ProfileRequest, ProfileRun


def read_only(path: str) -> ProfileRun:
    from stitch_lsp.profile.report import ReportError, load_report

    t0 = time.perf_counter()
    try:
        report = load_report(path)
    except ReportError as exc:
        return ProfileRun(ok=False, error_kind=ProfileErrorKind.failed, error=str(exc))
    return ProfileRun(ok=True, report_path=path, report=report, wall_s=time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stitch_lsp.profile.worker")
    parser.add_argument("--read", metavar="REPORT", help="read an existing .ncu-rep instead")
    args = parser.parse_args(argv)
    if args.read:
        run = read_only(args.read)
    else:
        from stitch_lsp.profile.runner import run_profile

        try:
            req = ProfileRequest.model_validate_json(sys.stdin.read())
        except ValidationError as exc:
            run = ProfileRun(
                ok=False, error_kind=ProfileErrorKind.failed, error=f"bad request: {exc}"
            )
        else:
            run = run_profile(req)
    sys.stdout.write(run.model_dump_json())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
