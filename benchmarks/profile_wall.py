"""Wall time from "profile this file" to diagnostics ready to publish: default sections vs full.

Each run does what the editor does: build (for a .cu), run under ncu, read the report, map it
onto the file and build the findings. Usage (needs a GPU and ncu):

    python benchmarks/profile_wall.py examples/kernels/profile_uncoalesced.cu --out r.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from stitch_lsp.config import DEFAULT_NCU_SECTIONS
from stitch_lsp.models.profile import ProfileRequest
from stitch_lsp.profile.findings import report_findings
from stitch_lsp.profile.mapping import SourceMapper, workspace_candidates
from stitch_lsp.profile.worker.measure import run_profile


def one(path: Path, full: bool, report_dir: Path) -> dict:
    t0 = time.perf_counter()
    req = ProfileRequest(
        path=str(path),
        sections=list(DEFAULT_NCU_SECTIONS),
        full_set=full,
        launch_count=1,
        report_dir=str(report_dir),
    )
    run = run_profile(req)
    if not run.ok or run.report is None:
        return {"ok": False, "error": run.error, "log": run.log_tail[-1500:]}
    mapper = SourceMapper(run.report.sources, {}, workspace_candidates([path.parent]))
    findings = report_findings(run.report, mapper)
    wall = time.perf_counter() - t0
    return {
        "ok": True,
        "wall_s": wall,
        "build_s": run.build_s,
        "ncu_s": run.ncu_s,
        "read_and_map_s": wall - run.build_s - run.ncu_s,
        "kernels": [k.name for k in run.report.kernels],
        "rules": sum(len(k.rules) for k in run.report.kernels),
        "diagnostics": len(findings),
        "on_lines": sorted({f.line for f in findings if Path(f.path) == path.resolve()}),
        "report_bytes": Path(run.report_path or "").stat().st_size if run.report_path else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--report-dir", type=Path, default=Path("/tmp/profile-bench"))
    args = ap.parse_args()
    results: dict[str, list[dict]] = {"default": [], "full": []}
    for i in range(args.repeat):
        for mode in ("default", "full"):
            r = one(args.path, mode == "full", args.report_dir / f"{mode}{i}")
            results[mode].append(r)
            print(mode, json.dumps(r)[:400], flush=True)
    summary = {}
    for mode, runs in results.items():
        ok = [r["wall_s"] for r in runs if r.get("ok")]
        summary[mode] = {
            "median_wall_s": statistics.median(ok) if ok else None,
            "median_ncu_s": (
                statistics.median([r["ncu_s"] for r in runs if r.get("ok")]) if ok else None
            ),
            "runs": len(runs),
            "ok": len(ok),
        }
    doc = {
        "file": str(args.path),
        "python": platform.python_version(),
        "summary": summary,
        "runs": results,
    }
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2))
    print(json.dumps(summary, indent=2))
    return 0 if all(s["ok"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
