"""How many reads go through a permute, with and without the channels_last rewrite (CPU).

For each problem: capture, apply the rewrite catalogue without `channels_last` and with it, and
count the reads of a computed value through a permutation of its storage (each is a strided
pass in the generated kernels), the elements they read, the identity copies and the
convolutions. No GPU is needed.

    STITCH_MODEL_SIZE=full STITCH_MODEL_DTYPE=bfloat16 \\
        python benchmarks/permuted_reads.py benchmarks/real_models/tv_convnext_tiny.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stitch_lsp.compiler import rewrites
from stitch_lsp.compiler.ir import Graph
from stitch_lsp.compiler.relayout import permutation_of
from stitch_lsp.compiler.worker.capture import capture


def counts(graph: Graph) -> tuple[int, int, int, int]:
    """(permuted reads, elements they read, identity copies, convolutions)."""
    reads = elems = 0
    for n in graph.nodes:
        for u in n.uses:
            if u.vid in graph.leaves:
                continue
            if permutation_of(u, math.prod(graph.shape_of(u.vid))) is not None:
                reads += 1
                elems += math.prod(u.shape)
    copies = sum(1 for n in graph.nodes if n.kind == "ew" and n.fn == "identity")
    convs = sum(1 for n in graph.nodes if n.kind == "conv")
    return reads, elems, copies, convs


def main() -> int:
    others = tuple(r.name for r in rewrites.CATALOGUE if r.name != "channels_last")
    for arg in sys.argv[1:]:
        path = Path(arg)
        graph = capture(path)
        rewrites.apply_rewrites(graph, others)
        a = counts(graph)
        graph = capture(path)
        rewrites.apply_rewrites(graph)
        b = counts(graph)
        print(
            f"{path.stem}: permuted reads {a[0]} -> {b[0]}, elements read through a permute "
            f"{a[1] / 1e6:.1f}M -> {b[1] / 1e6:.1f}M, identity copies {a[2]} -> {b[2]}, "
            f"convolutions {a[3]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
