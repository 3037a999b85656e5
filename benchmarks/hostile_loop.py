"""The longest event-loop block of the real server in each hostile case of issue 24.

Each case (tests/hostile/loop_cases.py) starts a fresh `stitch-lsp serve` in a new folder with
the loop watchdog on, plants the hostile file or sends the hostile messages, checks that other
requests are still answered, and reads the longest block while serving from `stitch/debugInfo`
(for the 50 MB case, from the first keystroke on: opening 50 MB is a cost of its own). Printed:
the block, the message handled when it happened, the case's wall time, and what the server
answered.

Run: .venv/bin/python benchmarks/hostile_loop.py [--case SUBSTRING ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.loop_cases import CASES, Outcome, run_case  # noqa: E402


def summary(outcome: Outcome) -> str:
    """One line of what the server answered."""
    a = outcome.answers
    if "notes" in a:
        return next((n for n in a["notes"] if "x.jsonl" in n), "no note on x.jsonl")
    if "reply" in a:
        reply = a["reply"]
        return str((reply.get("result") or {}).get("message") or reply.get("error"))
    if "watched" in a:
        w = a["watched"]
        if not w:
            return "the server reports no watched-file figures"
        return f"{w['received']} received, {w['dropped']} dropped, {w['reanalysed']} re-analysed"
    if "symbols" in a:
        return f"{a['bytes']:,} bytes, {a['symbols']} outline entries sent"
    if "doc" in a:
        return f"last edit {a['doc']['editMs']:.1f} ms, {a['doc']['analysisCount']} analysis"
    errors = sum(1 for r in a.values() if isinstance(r, dict) and "error" in r)
    return f"{len(a)} commands, {errors} internal errors"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="*", default=[], help="run only cases containing these")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    names = [n for n in CASES if not args.case or any(c in n for c in args.case)]
    rows: list[dict[str, Any]] = []
    print(f"{'max ms':>8} {'wall s':>7}  case / during / answer")
    for name in names:
        with tempfile.TemporaryDirectory(prefix="stitch-hostile-") as tmp:
            try:
                outcome = run_case(name, Path(tmp))
            except Exception as exc:  # a case that hangs or fails is a result too
                print(f"{'-':>8} {'-':>7}  {name}: FAILED {type(exc).__name__}: {exc}"[:300])
                rows.append({"case": name, "error": f"{type(exc).__name__}: {exc}"[:500]})
                continue
        line = summary(outcome)
        print(
            f"{outcome.max_lag_ms:8.1f} {outcome.seconds:7.1f}  {name} / "
            f"{outcome.worst_during} / {line}"[:400],
            flush=True,
        )
        rows.append(
            {
                "case": name,
                "max_lag_ms": outcome.max_lag_ms,
                "during": outcome.worst_during,
                "seconds": round(outcome.seconds, 2),
                "answer": line,
            }
        )
    worst = max((r.get("max_lag_ms", 0.0) for r in rows), default=0.0)
    print(f"longest block over all cases: {worst:.1f} ms; load average {os.getloadavg()}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "cases": rows,
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                },
                indent=1,
            )
        )
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
