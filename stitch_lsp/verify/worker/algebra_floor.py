"""The FLOPs the builtin coder's algebra removes from a reference, for the roofline floor.

The floor says what no correct program can beat: the reference's bytes at the memory ceiling,
its heavy ops' FLOPs at peak. But an exact identity can remove a heavy op: a sum over a
Linear's outputs is a matrix-vector product with summed weights (`sum_before_linear`), which
does a thousandth of the GEMM's FLOPs. A floor built on the reference's GEMM then calls an
honest, correct program "faster than possible". So where a candidate beats that floor, the
Verifier captures the reference as the builtin coder does, applies the rewrite catalogue, and
lowers the FLOP term by the heavy-op FLOPs the catalogue removes; only a candidate faster than
that lowered floor is an exploit. Everything the catalogue does is exact and CPU-tested against
float64, and each entry's removal is named in the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stitch_lsp.compiler.ir import Graph, Node, numel


@dataclass
class AlgebraFloor:
    removed_flops: int = 0  # heavy-op FLOPs the catalogue removes (0: none, or no capture)
    rewrites: list[str] = field(default_factory=list)  # what fired, where
    note: str | None = None  # why the reference could not be rewritten


def node_flops(n: Node) -> int:
    """A heavy node's FLOPs as the floor counts them: GEMMs and attention as multiply-adds,
    a convolution's direct count over its window (fast algorithms), anything else 0."""
    if n.kind == "gemm" and len(n.uses) >= 2:
        return 2 * numel(n.shape) * n.uses[0].shape[-1]
    if n.kind == "conv" and len(n.uses) >= 2:
        # weight (out, in / groups, *window), or (in, out / groups, *window) when transposed:
        # each output (input) element takes in / groups (out / groups) taps after the division
        w = n.uses[1].shape
        per = w[1] if len(w) > 1 else 1
        spread = n.uses[0].shape if n.fn.startswith("conv_transpose") else n.shape
        return 2 * numel(spread) * per
    if n.kind == "attn" and len(n.uses) >= 3:
        q, k = n.uses[0].shape, n.uses[1].shape
        return 4 * numel(q) * k[-2]
    return 0


def heavy_flops(graph: Graph) -> int:
    return sum(node_flops(n) for n in graph.nodes)


def algebra_floor(reference: Path) -> AlgebraFloor:
    """What the rewrite catalogue removes from `reference` (captured on the meta device)."""
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture

    try:
        graph = capture(reference)
        before = heavy_flops(graph)
        applied = apply_rewrites(graph)
        after = heavy_flops(graph)
    except Exception as exc:  # the floor stays as the trace made it
        return AlgebraFloor(note=f"not rewritten: {type(exc).__name__}: {exc}"[:300])
    return AlgebraFloor(max(0, before - after), [a.describe() for a in applied])
