"""Values after the algebra rewrites, on the CPU, for problems or library models (no GPU).

For each KernelBench-format file: capture the model, apply the whole catalogue
(`stitch_lsp.compiler.rewrites.apply_rewrites`), run the rewritten graph on the CPU interpreter
(tests/builtin/interp.py) and print the rewrites that fired, the largest absolute difference
from the model's own output and the output's largest magnitude. Each file runs in its own
process with a time limit, so one slow capture does not stop the sweep.

    python benchmarks/model_zoo.py --set third /tmp/zoo3
    python benchmarks/rewrite_fidelity.py /tmp/zoo3/*.py --jobs 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(path: Path) -> str:
    import torch

    sys.path.insert(0, str(REPO))
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture
    from tests.builtin.helpers import import_path
    from tests.builtin.interp import run_graph

    graph = capture(path)
    names = sorted({a.name for a in apply_rewrites(graph)})
    mod = import_path(path, f"rw_{path.stem}")
    # in the mode the model is made in, as capture sees it (KernelBench's modules train)
    torch.manual_seed(0)
    ref = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(0)
    twin = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = ref(*[t.clone() for t in inputs])
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        got = run_graph(graph, twin, [t.clone() for t in inputs])
    err = max(float((a.double() - b.double()).abs().max()) for a, b in zip(got, want, strict=True))
    scale = max(float(b.double().abs().max()) for b in want)
    return f"{path.stem} rewrites={','.join(names) or '-'} err={err:.3g} scale={scale:.3g}"


def run(path: Path, timeout: float) -> str:
    cmd = [sys.executable, __file__, "--one", str(path)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"{path.stem} timeout after {timeout:.0f} s"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(path.stem)]
    if done.returncode or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{path.stem} failed: {last[:200]}"
    return lines[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(one(args.one))
        return 0
    files = [p for p in args.paths if p.name != "_common.py"]
    with ThreadPoolExecutor(args.jobs) as ex:
        for line in ex.map(lambda p: run(p, args.timeout), files):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
