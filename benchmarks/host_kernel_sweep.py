"""The builtin coder's pointwise kernels run on the CPU against the captured graph, model by model.

For each problem: capture, generate, compile every pointwise kernel as host C++ and run it
thread by thread on the graph's values (tests/builtin/host_kernels.py), and print the kernels
whose outputs differ. No GPU is needed; nvcc's CUDA headers and g++ are.

    python benchmarks/model_zoo.py /tmp/zoo
    STITCH_MODEL_DTYPE=bfloat16 python benchmarks/host_kernel_sweep.py /tmp/zoo --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.builtin.host_kernels import check_program, nvcc_include, seeded_problem


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+", type=Path, help="problem files or folders of them")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    include = nvcc_include()
    if include is None:
        print("needs nvcc (for the CUDA headers) and g++")
        return 2
    files = [f for p in args.paths for f in (sorted(p.glob("*.py")) if p.is_dir() else [p])]
    rows = []
    for f in files:
        start = time.perf_counter()
        try:
            model, inputs = seeded_problem(f, f"sweep_{f.stem}")
            problems = check_program(f, model, inputs, include)
            status = "ok" if not [p for p in problems if not p.startswith("skipped")] else "off"
        except Exception as exc:  # a model the capture refuses is not this sweep's business
            problems, status = [f"{type(exc).__name__}: {str(exc)[:200]}"], "not run"
        seconds = time.perf_counter() - start
        rows.append({"problem": f.stem, "status": status, "problems": problems, "s": seconds})
        print(f"{f.stem}: {status} ({seconds:.1f} s) {'; '.join(problems)[:400]}", flush=True)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "off", "not run")}
    print(f"{len(rows)} problems ({os.environ.get('STITCH_MODEL_DTYPE', 'float32')}): {counts}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if counts["off"] else 0


if __name__ == "__main__":
    sys.exit(main())
