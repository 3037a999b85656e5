"""The longest the language server's event loop was blocked, over a whole test run.

Serving (after `initialized`) and start-up are reported apart. Every server the tests start runs
the loop watchdog (`STITCH_LOOP_WATCHDOG`: a task that sleeps
20 ms and measures how late it wakes) and appends its figures to `STITCH_LOOP_REPORT` at exit.
This runs the chosen tests with both set and prints the worst servers: the longest block, the
test that started the server, the LSP message handled last before it, and how many wake-ups came
more than 100 ms late. A block on a machine whose cores are all busy includes time the OS gave
to other processes; the load average is printed for that reason.

Run: .venv/bin/python benchmarks/loop_block.py [--tests tests/hostile tests/server] [--json out]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", nargs="+", default=["tests/hostile", "tests/server"])
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="stitch-loop-") as tmp:
        report = Path(tmp) / "loop.jsonl"
        env = {**os.environ, "STITCH_LOOP_WATCHDOG": "1", "STITCH_LOOP_REPORT": str(report)}
        load_before = os.getloadavg()
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.tests],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - started
        rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    tail = proc.stdout.strip().splitlines()[-1:] or ["(no pytest output)"]
    rows.sort(key=lambda r: r.get("maxLagMs") or 0.0, reverse=True)
    print(f"pytest {' '.join(args.tests)}: {tail[0]} in {seconds:.0f} s")
    print(f"{len(rows)} server(s); load average before {load_before}, after {os.getloadavg()}")
    print(f"{'max ms':>8} {'>100ms':>6} {'gc ms':>6} {'start ms':>8}  during / test")
    for r in rows[: args.top]:
        test = (r.get("test") or "?").split(" ")[0]
        print(
            f"{r.get('maxLagMs', 0):8.1f} {r.get('over100ms', 0):6d} {r.get('gcMaxMs', 0):6.1f} "
            f"{r.get('startupMaxLagMs', 0):8.1f}  {r.get('worstDuring')} / {test}"
        )
    starts = sorted((r.get("startupMaxLagMs") or 0.0 for r in rows), reverse=True)
    print(f"start-up (until initialized is done), longest: {starts[0] if starts else '-'} ms")
    summary = {
        "tests": args.tests,
        "pytest": tail[0],
        "servers": len(rows),
        "max_lag_ms": rows[0]["maxLagMs"] if rows else None,
        "startup_max_lag_ms": max((r.get("startupMaxLagMs") or 0.0 for r in rows), default=None),
        "servers_over_100ms": sum(1 for r in rows if (r.get("maxLagMs") or 0) > 100),
        "wakeups_over_100ms": sum(r.get("over100ms") or 0 for r in rows),
        "worst": rows[: args.top],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
