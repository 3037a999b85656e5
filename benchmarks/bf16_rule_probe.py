"""How far honest and downgraded bf16 implementations sit from float64, against eager bf16 (CPU).

The Verifier clears a bf16/fp16 miss when the candidate is no further from the float64 answer
than eager is, times 1.1, in tolerance units (`precision.REDUCED_FACTOR`), or at eager's level
in largest and mean absolute error (`precision.within_reference_error`). This probe asks how
the three measures separate:
  honest     the captured graph run by the tests' interpreter (fp32 math between bf16 loads and
             stores, rounded where PyTorch rounds each op): another order, the same precision;
  downgrade  eager with every nn.Linear summing its K terms in bf16 (fp32 products over blocks
             of 32, each block's partial sum rounded to bf16 and added in bf16).
Each figure is a ratio to eager bf16's own distance from the model run in float64.

    STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 \\
        python benchmarks/bf16_rule_probe.py benchmarks/real_models/hf_bert.py
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stitch_lsp.compiler.rewrites import apply_rewrites
from stitch_lsp.compiler.worker.capture import capture
from tests.builtin.helpers import import_path
from tests.builtin.interp import run_graph


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, (tuple, list)) else out


def _errors(x: Any, exact: Any, tol: float = 1e-2) -> tuple[float, float, float]:
    """(largest absolute error, largest in tolerance units, mean absolute error)."""
    d = (x.double() - exact).abs()
    return float(d.max()), float((d / (tol + tol * exact.abs())).max()), float(d.mean())


def _bf16_sum_linear(x: Any, w: Any, b: Any = None) -> Any:
    out = None
    for k0 in range(0, x.shape[-1], 32):
        part = (x[..., k0 : k0 + 32].float() @ w[:, k0 : k0 + 32].float().t()).to(x.dtype)
        out = part if out is None else out + part
    return out if b is None else out + b


def main() -> int:
    torch.set_num_threads(2)
    for arg in sys.argv[1:]:
        path = Path(arg)
        mod = import_path(path, f"probe_{path.stem}")
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).eval()
        torch.manual_seed(1)
        inputs = list(mod.get_inputs())
        wide = [t.double() if t.is_floating_point() else t for t in inputs]
        with torch.no_grad():
            exact = _first(copy.deepcopy(model).double()(*wide)).double()
            eager = _first(model(*inputs))
            graph = capture(path)
            apply_rewrites(graph)
            honest = run_graph(graph, copy.deepcopy(model), inputs)[0]
            linear = F.linear
            F.linear = _bf16_sum_linear
            try:
                down = _first(model(*inputs))
            finally:
                F.linear = linear
        ref = _errors(eager, exact)
        print(f"{path.stem}: eager bf16 from float64: max {ref[0]:.3g}, {ref[1]:.3g} units, "
              f"mean {ref[2]:.3g}")  # fmt: skip
        for label, x in (("honest", honest), ("downgrade", down)):
            e = _errors(x, exact)
            print(
                f"  {label:9s} / eager: max {e[0] / ref[0]:.2f}x, units {e[1] / ref[1]:.2f}x, "
                f"mean {e[2] / ref[2]:.2f}x",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
