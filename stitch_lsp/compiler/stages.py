"""The program's stages after partitioning: which run as weight preparation, and which
independent pointwise kernels share one launch.

A decode step or a short sequence is bound by launches, not bytes: the rotary kernels of q and
k read the same GEMM output and write different tensors, so they run as the two halves of one
grid (Inductor's combo kernels do the same), each half with its own size and vector path.
"""

from __future__ import annotations

from stitch_lsp.compiler.ir import Graph
from stitch_lsp.compiler.partition import Group, fold_gemm_epilogues, partition, reads

# Kernel groups that may run as weight preparation (our launchers, cuBLAS through them).
_PREPARABLE = ("pointwise", "reduction", "gemm")

# At most this many kernels share one launch: each is a branch of the combined kernel.
MAX_PARTS = 4


def plan_stages(graph: Graph) -> list[Group]:
    """Partition, GEMM epilogues, then independent pointwise neighbours as one launch."""
    return combine_pointwise(graph, fold_gemm_epilogues(graph, partition(graph)))


def weight_only(graph: Graph, groups: list[Group], kernels: set[int]) -> set[int]:
    """The stages (indices into `groups`, of those in `kernels`) that read parameters and
    buffers alone (directly or through each other): the weights a rewrite derives, such as a
    summed Linear weight or a pooled convolution's. Their results are the same on every call
    until a tensor they read changes, so they run apart from the per-call launches, as the
    weight transforms of cuDNN and TensorRT do.

    Left in the per-call launches: anything that reads an input or a factory, draws random
    numbers, writes state (running statistics, a cache), or reads a tensor the forward writes (a
    training-mode batch norm's buffers change during the call)."""
    written: set[int] = set()
    for g in groups:
        for n in g.sinks + g.nodes:
            if n.kind == "bn_update" or n.params.get("effect"):
                written |= {u.vid for u in n.uses if u.vid in graph.leaves}
    out_vids = {u.vid for u in graph.outputs}
    prepared: set[int] = set()
    made: set[int] = set()
    for i, g in enumerate(groups):
        if g.kind not in _PREPARABLE or g.gid not in kernels or g.sinks:
            continue
        if any(n.kind in ("random", "bn_update") or n.params.get("effect") for n in g.nodes):
            continue
        if any(n.vid in out_vids for n in g.nodes):
            continue
        own = {n.vid for n in g.nodes}
        stored = [u.vid for n in g.nodes for u in reads(graph, n, graph.recomputed)]
        ok = True
        for vid in stored:
            leaf = graph.leaves.get(vid)
            if vid in own or vid in made:
                continue
            if leaf is None or leaf.kind not in ("param", "buffer") or vid in written:
                ok = False
                break
        if ok:
            prepared.add(i)
            made |= own
    return prepared


def _reads(graph: Graph, g: Group) -> set[int]:
    return {u.vid for n in g.nodes + g.sinks for u in reads(graph, n, graph.recomputed)}


def _writes(g: Group) -> set[int]:
    """What a pointwise kernel writes: its outputs and the buffers its stores fill."""
    return set(g.outputs) | g.stored_buffers


def combine_pointwise(graph: Graph, groups: list[Group]) -> list[Group]:
    """Neighbouring pointwise kernels that neither read what the other writes, as one launch
    (`Group.parts`). Weight preparation's kernels stay apart: they leave the per-call launches."""
    every = {g.gid for g in groups if g.kind in _PREPARABLE}
    prepared = {groups[i].gid for i in weight_only(graph, groups, every)}
    out: list[Group] = []
    for g in groups:
        prev = out[-1] if out else None
        if (
            prev is not None
            and g.kind == "pointwise"
            and prev.kind == "pointwise"
            and g.gid not in prepared
            and prev.gid not in prepared
            and len(prev.parts or [prev]) < MAX_PARTS
            and not (_reads(graph, g) & _writes(prev))
            and not (_reads(graph, prev) & _writes(g))
        ):
            out[-1] = _combined(prev, g)
            continue
        out.append(g)
    return out


def _combined(first: Group, second: Group) -> Group:
    parts = [*(first.parts or [first]), second]
    g = Group(first.gid, "pointwise")
    g.parts = parts
    for p in parts:
        g.nodes += p.nodes
        g.space.update(p.space)
        g.level.update(p.level)
        g.outputs += p.outputs
        g.sinks += p.sinks
    g.full_numel = max(p.full_numel for p in parts)
    return g
