"""The first stage of a generated program whose output differs from the captured graph's.

A whole-model candidate that misses its reference says nothing about where it went wrong. This
runs the captured IR graph with eager torch ops on the CPU (tests/builtin/interp.py, the CPU
tests' interpreter), then the candidate's launches one by one (plain launches, no CUDA graph),
and after each launch compares every value that launch wrote with the interpreter's value of
the same id. It prints the stages in order with their largest difference, marking the first
that is off: that kernel (or the arena plan around it) is the bug.

    STITCH_MODEL_SIZE=full python3 benchmarks/stage_diff.py benchmarks/real_models/tv_swin_t.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "builtin"))
from builtin_speed import _import
from interp import run_graph_env

from stitch_lsp.compiler.rewrites import apply_rewrites
from stitch_lsp.compiler.worker.capture import capture
from stitch_lsp.compiler.worker.generate import generate


def stage_diffs(path: Path, tol: float, show: int) -> int:
    cand = generate(path, path.name)
    if not cand.handled:
        print(f"{path.stem}: not handled: {cand.reason[:200]}")
        return 1
    graph = capture(path)
    apply_rewrites(graph)
    tmp = Path(tempfile.mkdtemp()) / f"{path.stem}_builtin.py"
    tmp.write_text(cand.source or "")
    ref, new = _import(path, f"ref_{path.stem}"), _import(tmp, f"new_{path.stem}")
    torch.manual_seed(42)
    model = ref.Model(*ref.get_init_inputs()).eval()  # the interpreter runs on the CPU
    torch.manual_seed(42)
    model_new = new.ModelNew(*ref.get_init_inputs()).cuda().eval()
    cpu_inputs = list(ref.get_inputs())
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in cpu_inputs]
    with torch.no_grad():
        env = run_graph_env(graph, model, cpu_inputs)
    seen: set[str] = set()
    first: list[str] = []
    printed = 0
    original = new._check

    def check(code: int, lib: Any, what: str) -> None:
        nonlocal printed
        original(code, lib, what)
        torch.cuda.synchronize()
        local = sys._getframe(1).f_locals
        for name, t in list(local.items()):
            if name in seen or not (name[:1] == "t" and name[1:].isdigit()):
                continue
            seen.add(name)
            want = env.get(int(name[1:]))
            if not isinstance(t, torch.Tensor) or not isinstance(want, torch.Tensor):
                continue
            w = want.reshape(-1).float()
            g = t.reshape(-1)[: w.numel()].float().cpu()
            if g.numel() != w.numel():
                print(f"  {what}: {name} has {g.numel()} elements, the graph {w.numel()}")
                continue
            diff = (g - w).abs().max().item() if w.numel() else 0.0
            scale = w.abs().max().item() if w.numel() else 0.0
            bad = not diff <= tol * max(1.0, scale)
            if bad and not first:
                first.append(f"{what} writes {name}")
            if (bad and printed < show + 12) or printed < show:
                mark = "  <-- first off" if bad and first[0].endswith(name) else ""
                print(f"  {what}: {name} max diff {diff:.3g} (scale {scale:.3g}){mark}")
                printed += 1

    new._check = check
    with torch.no_grad():
        model_new._launch(*inputs)
    print(f"{path.stem}: first stage off: {first[0] if first else 'none'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--tol", type=float, default=1e-3, help="relative to each value's scale")
    ap.add_argument("--show", type=int, default=5, help="stages printed besides the bad ones")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return max(stage_diffs(p, args.tol, args.show) for p in args.paths)


if __name__ == "__main__":
    sys.exit(main())
