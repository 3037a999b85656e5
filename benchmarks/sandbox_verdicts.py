"""Verdicts and timings of the Verifier inside bubblewrap and unconfined, problem by problem.

The builtin coder writes one candidate per problem (once); each candidate is then verified twice
on the same GPU, once with `stitch.sandbox` bwrap and once with none, in alternating order so
that neither mode always runs warm. A row records both statuses, both speedups vs eager and both
wall times; the summary counts the problems whose verdicts differ. torch.compile is left out of
the timing (it is the same baseline in both modes and costs ~9 s a verify on the H200).

    python3 benchmarks/sandbox_verdicts.py ../shared/kernelbench-dev/level1 \\
        ../shared/kernelbench-dev/level2 --jsonl out.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stitch_lsp.compiler import generate_candidates
from stitch_lsp.config import Settings
from stitch_lsp.verify import verify
from stitch_lsp.workers.sandbox import sandbox_problem


def problem_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.py"), key=lambda f: int(f.name.split("_", 1)[0]))
        else:
            out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--jsonl", type=Path, help="one JSON row per problem, written as it finishes")
    ap.add_argument("--timing-trials", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--device", help="cuda:K (default: the first visible GPU)")
    args = ap.parse_args()
    problem = sandbox_problem()
    if problem is not None:
        print(f"no sandbox on this machine: {problem}", file=sys.stderr)
        return 2
    files = problem_files(args.paths)
    base = Settings(
        trials=args.trials, timing_trials=args.timing_trials, sandbox="bwrap", device=args.device
    )
    out_dir = Path(tempfile.mkdtemp(prefix="sandbox-verdicts-"))
    start = time.perf_counter()
    cands = generate_candidates(files, base, candidate_dir=out_dir)
    print(f"generated {len(files)} candidates in {time.perf_counter() - start:.1f} s (sandboxed)")
    sink = args.jsonl.open("w") if args.jsonl else None
    rows = []
    for i, (ref, cand) in enumerate(zip(files, cands, strict=True)):
        if not (cand.handled and cand.source):
            row = {"problem": ref.stem, "handled": False, "reason": (cand.reason or "")[:200]}
        else:
            path = out_dir / f"{ref.stem}_builtin.py"
            path.write_text(cand.source)
            row = {"problem": ref.stem, "handled": True}
            order = ("bwrap", "none") if i % 2 == 0 else ("none", "bwrap")
            for mode in order:
                settings = base.model_copy(update={"sandbox": mode})
                res = verify(ref, path, settings, compare_compile=False, extra_baselines=False)
                row[mode] = {
                    "status": res.status.value,
                    "speedup_vs_eager": res.speedup_vs_eager,
                    "wall_s": round(res.wall_seconds, 2),
                    "sandbox": res.sandbox,
                    "message": res.message[:200],
                }
            row["same_verdict"] = row["bwrap"]["status"] == row["none"]["status"]
        rows.append(row)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
        print(json.dumps(row), flush=True)
    done = [r for r in rows if r.get("handled")]
    same = sum(r["same_verdict"] for r in done)
    print(f"\n{len(done)} verified in both modes; same verdict on {same}")
    for mode in ("bwrap", "none"):
        walls = [r[mode]["wall_s"] for r in done]
        correct = sum(r[mode]["status"] == "passed" for r in done)
        sp = [r[mode]["speedup_vs_eager"] for r in done if r[mode]["speedup_vs_eager"]]
        gmean = statistics.geometric_mean(sp) if sp else float("nan")
        mean_wall = statistics.mean(walls) if walls else float("nan")
        print(
            f"{mode:6} correct {correct}/{len(done)}, geomean speedup vs eager {gmean:.3f}x, "
            f"mean wall {mean_wall:.1f} s"
        )
    return 0 if same == len(done) else 1


if __name__ == "__main__":
    raise SystemExit(main())
