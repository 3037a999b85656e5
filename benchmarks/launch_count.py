"""What a generated program launches per forward, by kind (CPU, no GPU needed).

For each problem file, the builtin generator's stages: generated kernels (fused elementwise and
reduction kernels, flash attention), cuBLAS/cuBLASLt GEMMs (and how many carry a fused
epilogue), cuDNN convolutions and PyTorch fallback stages; `per_call` leaves out the weight
preparation stages, which run once per weight change (`prepared`). Real models build the case that
STITCH_MODEL_SIZE / STITCH_MODEL_DTYPE choose. Run it from two checkouts to compare commits:

    STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 python3 benchmarks/launch_count.py \\
        benchmarks/real_models/hf_*.py tests/data/stitch_problems/level3/1_LlamaDecodeStep.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))


def count(path: str) -> dict[str, object]:
    from stitch_lsp.compiler.worker.generate import generate

    cand = generate(Path(path), Path(path).name)
    if not cand.handled:
        return {"problem": Path(path).stem, "handled": False, "reason": cand.reason[:160]}
    kinds = Counter(g.kind for g in cand.groups)
    lt = sum(1 for g in cand.groups if g.kind == "gemm" and g.library and "epilogue" in g.library)
    # weight preparation runs once per weight change, not per forward (program.preparation)
    prepared = (cand.source or "").count(" [weight preparation]: ")
    return {
        "problem": Path(path).stem,
        "handled": True,
        "stages": len(cand.groups),
        "per_call": len(cand.groups) - prepared,
        "prepared": prepared,
        "kernels": kinds["pointwise"] + kinds["reduction"] + kinds["scan"] + kinds["attention"],
        "attention": kinds["attention"],
        "gemm": kinds["gemm"],
        "gemm_epilogue": lt,
        "conv": kinds["conv"],
        "fallback_stages": kinds["aten"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    with ProcessPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(count, args.paths))
    cols = ["stages", "per_call", "prepared", "kernels", "attention", "gemm", "gemm_epilogue"]
    cols += ["conv", "fallback_stages"]
    print("| problem | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for r in rows:
        if not r["handled"]:
            print(f"| {r['problem']} | not handled: {r['reason']} |")
            continue
        print(f"| {r['problem']} | " + " | ".join(str(r[c]) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
