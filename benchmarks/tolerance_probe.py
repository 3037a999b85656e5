"""How far from the exact answer are the fp32 reference, torch.compile and the builtin coder?

The Verifier compares a candidate with the fp32 eager reference at atol = rtol = 1e-4, as
KernelBench does. Where the reference's own rounding error is larger than that (sums that
nearly cancel), any candidate that adds in another order can fail. This script measures it: per
trial it runs the reference in float64 (the "exact" answer) and in fp32, torch.compile'd, and
the builtin candidate, and counts for each the elements beyond 1e-4 of the fp32 reference and
of the float64 one.

    python3 benchmarks/tolerance_probe.py shared/kernelbench-dev/level2/14_*.py --trials 5
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from builtin_speed import _import  # this folder: run as a script

from stitch_lsp.compiler.worker.generate import generate

TOL = 1e-4


def _beyond(got: torch.Tensor, want: torch.Tensor) -> dict[str, float]:
    g, w = got.double(), want.double()
    bad = ~torch.isclose(g, w, atol=TOL, rtol=TOL)
    return {"beyond_1e-4": int(bad.sum()), "max_abs_err": float((g - w).abs().max())}


def probe(problem: Path, trials: int, with_compile: bool = True) -> dict[str, Any]:
    ref = _import(problem, "ref_" + problem.stem)
    cand = generate(problem, problem.name)
    new = None
    if cand.handled and cand.source:
        path = Path(tempfile.mkdtemp()) / f"{problem.stem}_builtin.py"
        path.write_text(cand.source)
        new = _import(path, "new_" + problem.stem)
    torch.manual_seed(42)
    with torch.device("cuda"):
        model = ref.Model(*ref.get_init_inputs())
    exact = copy.deepcopy(model).double()
    compiled = torch.compile(copy.deepcopy(model)) if with_compile else None
    model_new = None
    if new is not None:
        torch.manual_seed(42)
        with torch.device("cuda"):
            model_new = new.ModelNew(*ref.get_init_inputs())
    rows = []
    for t in range(trials):
        torch.manual_seed(t)
        with torch.device("cuda"):
            inputs = list(ref.get_inputs())
        with torch.no_grad():
            want32 = model(*inputs)
            want64 = exact(*[x.double() if x.is_floating_point() else x for x in inputs])
            outs = {"eager fp32": want32}
            if compiled is not None:
                outs["torch.compile"] = compiled(*inputs)
            if model_new is not None:
                outs["builtin"] = model_new(*inputs)
        row: dict[str, Any] = {"trial": t}
        for name, out in outs.items():
            row[name] = {"vs_fp32_ref": _beyond(out, want32), "vs_fp64": _beyond(out, want64)}
        rows.append(row)
        print(json.dumps(row))
    return {"problem": problem.stem, "trials": rows, "builtin_handled": cand.handled}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out (slow)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = [probe(p, args.trials, not args.no_compile) for p in args.problems]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
