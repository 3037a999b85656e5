"""Which op's summation order decides whether a candidate can pass? (CPU, no GPU needed)

Runs a KernelBench reference in fp32, then again with one torch function at a time computed in
float64 and rounded back to fp32 (a different, more exact order), and counts the output
elements that move beyond atol = rtol = 1e-4. An op whose reordering moves many elements is one
a candidate must compute exactly as the reference does (same library call, same layout) to pass
KernelBench's rule; an op that moves none can be fused or reordered freely.

    python benchmarks/order_sensitivity.py tests/data/kernelbench/level3/49_Mamba2*.py
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from builtin_speed import _import

FUNCTIONS = ("einsum", "matmul", "bmm", "mm", "cumsum", "sum", "mean", "softmax", "exp")


def _in_float64(fn: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        up = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a in args]  # fmt: skip
        out = fn(*up, **kwargs)
        return out.float() if isinstance(out, torch.Tensor) and out.is_floating_point() else out

    return run


def _outputs(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    mod = _import(args.problem, "order_sensitivity_problem")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        ref = _outputs(model(*inputs))
        print(f"{args.problem.stem}: {sum(r.numel() for r in ref):,} output elements, "
              f"largest {max(float(r.abs().max()) for r in ref):.3g}")  # fmt: skip
        for name in FUNCTIONS:
            original = getattr(torch, name)
            calls: list[int] = []
            setattr(torch, name, _in_float64(original, calls))
            try:
                alt = _outputs(model(*inputs))
            finally:
                setattr(torch, name, original)
            if not calls:
                continue
            moved = sum(
                int((~torch.isclose(a, r, atol=1e-4, rtol=1e-4)).sum())
                for a, r in zip(alt, ref, strict=True)
            )
            print(f"  torch.{name:8s} ({len(calls)} calls) in float64: {moved:,} elements "
                  "beyond the tolerance")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
