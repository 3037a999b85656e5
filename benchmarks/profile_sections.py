"""What each ncu section set costs for one kernel: replay passes, ncu wall time, findings.

Runs the same `.cu` example under ncu with a few section sets (through the project's runner,
so the flags are the ones the editor uses) and reads `profiler__replayer_passes` back from each
report. Usage (needs a GPU and ncu):

    python benchmarks/profile_sections.py examples/kernels/profile_uncoalesced.cu --out s.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stitch_lsp.config import DEFAULT_NCU_SECTIONS
from stitch_lsp.models.profile import ProfileRequest
from stitch_lsp.profile.findings import report_findings
from stitch_lsp.profile.mapping import SourceMapper, workspace_candidates
from stitch_lsp.profile.worker.measure import run_profile

DEFAULT = list(DEFAULT_NCU_SECTIONS)
VARIANTS: dict[str, tuple[list[str], bool]] = {
    "SpeedOfLight only": (["SpeedOfLight"], False),
    "default without SourceCounters": ([s for s in DEFAULT if s != "SourceCounters"], False),
    "default": (DEFAULT, False),
    "default + SpeedOfLight_RooflineChart": ([*DEFAULT, "SpeedOfLight_RooflineChart"], False),
    "--set full": ([], True),
}


def passes(report_path: str) -> float | None:
    import ncu_report

    ctx = ncu_report.load_report(report_path)
    action = ctx.range_by_idx(0).action_by_idx(0)
    m = action.metric_by_name("profiler__replayer_passes")
    return None if m is None else m.as_double()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--report-dir", type=Path, default=Path("/tmp/profile-sections"))
    args = ap.parse_args()
    rows = []
    for i, (label, (sections, full)) in enumerate(VARIANTS.items()):
        req = ProfileRequest(
            path=str(args.path),
            sections=sections,
            full_set=full,
            launch_count=1,
            report_dir=str(args.report_dir / str(i)),
        )
        run = run_profile(req)
        row: dict = {"sections": label, "ok": run.ok, "error": run.error}
        if run.ok and run.report is not None and run.report_path:
            mapper = SourceMapper(run.report.sources, {}, workspace_candidates([args.path.parent]))
            k = run.report.kernels[0]
            row |= {
                "passes": passes(run.report_path),
                "ncu_s": round(run.ncu_s, 2),
                "rules": len(k.rules),
                "markers": len(k.markers),
                "diagnostics": len(report_findings(run.report, mapper)),
                "roofline": k.roofline is not None,
                "report_kb": round(Path(run.report_path).stat().st_size / 1024),
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"file": str(args.path), "rows": rows}, indent=2))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
