"""Planner analysis over KernelBench problems: graph capture, roofline floors, and (on a GPU)
eager time against the fused floor.

    python benchmarks/planner_roofline.py [PROBLEM.py | DIR ...] [--profile] [--json OUT]

Without arguments it takes every problem under ../shared/kernelbench-dev (or
$STITCH_SHARED_DIR/kernelbench-dev). Each problem runs in its own planner worker, as in the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stitch_lsp.agents.planner import PlannerError, analyze_reference
from stitch_lsp.config import Settings


def _problems(args: list[str]) -> list[Path]:
    if not args:
        shared = Path(
            os.environ.get("STITCH_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared")
        )
        args = [str(shared / "kernelbench-dev")]
    out: list[Path] = []
    for a in args:
        p = Path(a)
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--profile", action="store_true", help="time the reference on the GPU")
    parser.add_argument("--json", type=Path, help="write the rows as JSON")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    settings = Settings.from_sources()
    rows = []
    print(
        "| problem | graph | ops | GFLOP | fused floor ms | unfused floor ms | eager ms "
        "| eager / fused floor | analysis s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for path in _problems(args.paths):
        started = time.perf_counter()
        try:
            a = analyze_reference(path, settings, profile=args.profile, timeout_s=args.timeout)
        except PlannerError as exc:
            print(f"| {path.parent.name}/{path.stem} | failed: {str(exc)[:80]} | | | | | | | |")
            continue
        took = time.perf_counter() - started
        ratio = a.eager_ms / a.fused_floor_ms if a.eager_ms and a.fused_floor_ms else None
        row = {
            "problem": f"{path.parent.name}/{path.stem}",
            "graph": a.graph_method,
            "ops": len([o for o in a.ops if o.flops or o.bytes]),
            "gflop": a.total_flops / 1e9,
            "fused_floor_ms": a.fused_floor_ms,
            "unfused_floor_ms": a.unfused_floor_ms,
            "eager_ms": a.eager_ms,
            "eager_over_floor": ratio,
            "analysis_s": took,
            "hardware": a.hardware.name,
        }
        rows.append(row)
        eager = f"{a.eager_ms:.3f}" if a.eager_ms is not None else "-"
        rat = f"{ratio:.2f}" if ratio is not None else "-"
        print(
            f"| {row['problem']} | {a.graph_method} | {row['ops']} | {row['gflop']:.1f} | "
            f"{a.fused_floor_ms:.3f} | {a.unfused_floor_ms:.3f} | {eager} | {rat} | {took:.1f} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
