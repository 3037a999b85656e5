"""Whole-model coverage and capture fidelity on the CPU, for problems the dev folder lacks.

For each KernelBench-format problem in FOLDER (its `batch_size = N` line set to --batch):
1. the builtin coder generates a candidate, or refuses and says why (op and line);
2. the captured IR, run with eager torch ops (tests/builtin/interp.py), is compared with the
   reference at atol = rtol = 1e-4 (1e-2 with `--dtype bfloat16` or `float16`, KernelBench's
   tolerance for them; the dtype reaches problems that read STITCH_MODEL_DTYPE, as the real-model
   suite's do): this checks capture (decompositions, views, broadcasts,
   layout ops); the CUDA that codegen emits is checked by the GPU tests and `bench`;
3. where they differ, the fp32 reference is compared with itself run in float64, so an
   ill-conditioned problem (one whose own fp32 run misses the tolerance) can be told from a
   capture bug.
With `--rewrites` the IR is compared after the algebra catalogue
(`stitch_lsp.compiler.rewrites.apply_rewrites`), and each row names the rewrites that fired.
Each problem runs in its own process with a time limit. No GPU needed.

    python benchmarks/capture_fidelity.py ~/KernelBench/KernelBench/level3 --json out.json
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _tol() -> float:
    return 1e-4 if os.environ.get("STITCH_MODEL_DTYPE", "float32") == "float32" else 1e-2


def check_one(problem: Path, rewrites: bool = False) -> dict[str, Any]:
    """In a child process: handled, faithful, and the reference's own fp32 error."""
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    import copy

    import torch
    from builtin_speed import _import

    from stitch_lsp.compiler.worker.capture import capture
    from stitch_lsp.compiler.worker.generate import generate
    from tests.builtin.interp import run_graph

    torch.set_num_threads(1)
    row: dict[str, Any] = {"problem": problem.stem}
    started = time.perf_counter()
    cand = generate(problem, problem.name)
    row["handled"] = cand.handled
    row["groups"] = len(cand.groups)
    if not cand.handled:
        row["reason"] = cand.reason
        return row
    try:
        ast.parse(cand.source)
        row["parses"] = True
    except SyntaxError as exc:
        row["parses"] = False
        row["parse_error"] = f"line {exc.lineno}: {exc.msg}"
    row["fallbacks"] = sum(1 for g in cand.groups if g.kind == "aten")
    mod = _import(problem, f"fidelity_{problem.stem}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    twin = copy.deepcopy(model)
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    try:
        graph = capture(problem)
        if rewrites:
            from stitch_lsp.compiler.rewrites import apply_rewrites

            row["rewrites"] = sorted({a.name for a in apply_rewrites(graph)})
        with torch.no_grad():
            want = _outputs(model(*[t.clone() for t in inputs]))
            got = run_graph(graph, twin, [t.clone() for t in inputs])
    except Exception as exc:  # the CPU interpreter lacks an op the GPU has (recurrent leaves)
        row["faithful"] = None
        row["note"] = f"not checked on the CPU: {type(exc).__name__}: {str(exc)[:120]}"
        return row
    worst, tol = 0.0, _tol()
    for g, w in zip(got, want, strict=True):
        if w.dtype.is_floating_point:
            worst = max(worst, float(((g - w).abs() / (tol + tol * w.abs())).max()))
    row["faithful"] = worst <= 1.0
    row["tol_units"] = worst
    if worst > 1.0:  # is the reference itself that far from float64?
        # float64, or float32 where an op has no float64 kernel (`torch._grouped_mm`, the
        # mixtures of experts), as the Verifier's oracle does for a bf16/fp16 miss
        for oracle in (torch.float64, torch.float32):
            m64 = copy.deepcopy(model).to(oracle)
            try:
                with torch.no_grad():
                    w64 = _outputs(
                        m64(*[t.to(oracle) if t.is_floating_point() else t for t in inputs])
                    )
                break
            except RuntimeError:
                if oracle == torch.float32:
                    raise
        row["oracle"] = str(oracle).removeprefix("torch.")

        def vs64(outs: list[Any]) -> float:
            return max(
                float(((w.double() - e).abs() / (tol + tol * e.abs())).max())
                for w, e in zip(outs, w64, strict=True)
                if w.dtype.is_floating_point
            )

        row["reference_tol_units_vs_fp64"] = vs64(want)
        row["graph_tol_units_vs_fp64"] = vs64(got)
        # as the Verifier's float64 oracle rules: no further from the exact answer than eager
        row["as_close_as_eager"] = row["graph_tol_units_vs_fp64"] <= 1.1 * vs64(want)
    row["seconds"] = round(time.perf_counter() - started, 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--batch", type=int, default=2, help="batch_size for the CPU run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per problem")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
        help="STITCH_MODEL_DTYPE for problems that read it (the real-model suite's)",
    )  # fmt: skip
    parser.add_argument(
        "--rewrites", action="store_true", help="compare the IR after the algebra rewrites"
    )
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(check_one(args.one, args.rewrites)))
        return 0
    os.environ["STITCH_MODEL_DTYPE"] = args.dtype
    files = sorted(args.folder.glob("*.py"), key=lambda p: (len(p.name.split("_")[0]), p.name))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            text = re.sub(r"^batch_size\s*=\s*\d+", f"batch_size = {args.batch}",
                          f.read_text(), flags=re.M)  # fmt: skip
            small = Path(tmp) / f.name
            small.write_text(text)
            try:
                proc = subprocess.run(
                    [sys.executable, __file__, str(args.folder), "--one", str(small),
                     *(["--rewrites"] if args.rewrites else [])],
                    capture_output=True, text=True, timeout=args.timeout, check=False,
                )  # fmt: skip
                lines = proc.stdout.strip().splitlines()
                row = json.loads(lines[-1]) if proc.returncode == 0 and lines else {
                    "problem": f.stem, "error": proc.stderr.strip().splitlines()[-1:]}  # fmt: skip
            except subprocess.TimeoutExpired:
                row = {"problem": f.stem, "error": f"over {args.timeout:g} s"}
            rows.append(row)
            verdict = (
                "refused: " + row.get("reason", "")[:90] if row.get("handled") is False
                else "error: " + str(row.get("error")) if "error" in row
                else "generated file does not parse: " + row["parse_error"]
                if row.get("parses") is False
                else row.get("note", "") if row.get("faithful") is None
                else "faithful" if row["faithful"]
                else f"differs by {row['tol_units']:.3g} tol units; the reference itself "
                f"{row.get('reference_tol_units_vs_fp64', float('nan')):.3g} from "
                f"{row.get('oracle', 'float64')}, the "
                f"graph {row.get('graph_tol_units_vs_fp64', float('nan')):.3g}"
            )  # fmt: skip
            fired = ",".join(row.get("rewrites", [])) if args.rewrites else ""
            print(f"{f.stem:40s} {verdict}" + (f" [{fired or 'no rewrite'}]" if args.rewrites
                                               else ""), flush=True)  # fmt: skip
    handled = sum(1 for r in rows if r.get("handled"))
    faithful = sum(1 for r in rows if r.get("faithful"))
    broken = sum(1 for r in rows if r.get("parses") is False)
    close = sum(1 for r in rows if r.get("faithful") is False and r.get("as_close_as_eager"))
    print(
        f"handled {handled}/{len(rows)}; captured faithfully {faithful}, and {close} more no "
        f"further from float64 than the reference; generated files that do not parse {broken} "
        f"(CPU, batch {args.batch}, {args.dtype})"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
