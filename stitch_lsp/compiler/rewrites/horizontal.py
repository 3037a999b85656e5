"""GEMMs that read one input side by side become one: q, k and v projections, a gated MLP's
gate and up. x W1^T, x W2^T, ... = x [W1; W2; ...]^T read back by column ranges, so the
input is read once and one launch replaces several (a decode step's GEMVs are launch-bound).
The concatenated weight reads parameters alone, so the program prepares it once and again
only when a weight changes (program.preparation). Torch-free."""

from __future__ import annotations

import math

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Graph, Node, Operand, Use
from stitch_lsp.compiler.rewrites.surgery import Applied, insert_before, new_node, users_of


def _weight(graph: Graph, g: Node) -> tuple[Use, Use] | None:
    """(input, weight) of a plain GEMM whose B operand is a whole 2-D parameter."""
    if g.kind != "gemm" or g.params.get("batch", 1) != 1 or len(g.args) != 2 or len(g.shape) != 2:
        return None
    a, w = g.args
    if not isinstance(a, Use) or not isinstance(w, Use) or w.strided:
        return None
    leaf = graph.leaves.get(w.vid)
    if leaf is None or leaf.kind != "param" or len(leaf.shape) != 2:
        return None
    stored = (leaf.shape[1], leaf.shape[0]) if w.trans else leaf.shape
    return (a, w) if tuple(w.shape) == tuple(stored) else None


def _bias(graph: Graph, g: Node, users: dict[int, list[Node]]) -> tuple[Node, Use] | None:
    """(the add, the bias) where the GEMM's one reader adds a bias parameter over its columns."""
    readers = users.get(g.vid, [])
    if len(readers) != 1:
        return None
    add = readers[0]
    if add.kind != "ew" or add.fn != "add" or len(add.args) != 2 or len(add.uses) != 2:
        return None
    mm, b = add.uses
    if mm.vid != g.vid:
        mm, b = b, mm
    leaf = graph.leaves.get(b.vid)
    n = g.shape[-1]
    if mm.vid != g.vid or mm.strided or mm.trans or leaf is None or leaf.kind != "param":
        return None
    if b.strided or b.trans or tuple(b.shape) != (n,) or tuple(leaf.shape) != (n,):
        return None
    if mm.shape[-1] != n or any(u.vid == add.vid for u in graph.outputs):
        return None
    return add, b


# Bytes of concatenated weights one program may keep beside its parameters.
MERGED_WEIGHT_BUDGET = 1 << 30


def _weight_bytes(graph: Graph, members: list[Node]) -> int:
    total = 0
    for g in members:
        leaf = graph.leaves[g.args[1].vid]  # type: ignore[union-attr]
        total += math.prod(leaf.shape) * (4 if leaf.dtype == "float32" else 2)
    return total


def _half(params: dict[str, object]) -> dict[str, object]:
    dtype = params.get("dtype")
    return {"dtype": dtype} if dtype not in (None, "float32") else {}


def gemms_sharing_an_input(graph: Graph) -> list[Applied]:
    """x W_i^T for several weights W_i of one x, as x [W_1; ...; W_n]^T whose column range i
    every reader of product i reads instead (with the biases, where each product has one,
    concatenated and added once). Exact: each column is the same dot product. Left alone: a
    product the forward returns, and any group one of whose readers cannot read a column
    range through strides."""
    users = users_of(graph)
    groups: dict[tuple[object, ...], list[Node]] = {}
    for g in graph.nodes:
        found = _weight(graph, g)
        if found is None or any(u.vid == g.vid for u in graph.outputs):
            continue
        a, w = found
        # one input read alike, weights stored alike (B is (k, n) as the GEMM reads it)
        key = (a, w.trans, w.shape[0], repr(sorted(g.params.items())))
        groups.setdefault(key, []).append(g)
    out: list[Applied] = []
    # the concatenated weights are copies beside the parameters: the smallest groups first (a
    # decode step's q, k and v before its MLP's gate and up), within a budget per program
    budget = MERGED_WEIGHT_BUDGET
    for nbytes, members in sorted(((_weight_bytes(graph, ms), ms) for ms in groups.values()),
                                  key=lambda bm: bm[0]):  # fmt: skip
        weights = [_weight(graph, g) for g in members]
        if len(members) < 2 or len({w[1].vid for w in weights if w}) != len(members):
            continue
        if nbytes > budget:
            continue
        biases = [_bias(graph, g, users) for g in members]
        together = all(b is not None for b in biases)
        made = _merge(graph, members, [b for b in biases if b] if together else [])
        if made is None:
            continue
        budget -= nbytes
        out.append(
            Applied(
                "gemms_sharing_an_input",
                " + ".join(g.origin for g in members)
                + (" (with their biases)" if together else ""),
                {n.vid for n in made},
            )
        )
        users = users_of(graph)
    return out


def _merge(graph: Graph, members: list[Node], biases: list[tuple[Node, Use]]) -> list[Node] | None:
    """Place the one GEMM (and its bias add) before the first member and point every reader at
    its column range; None, with the graph untouched, where a reader cannot be pointed."""
    first = min(members, key=graph.nodes.index)
    a, w0 = first.args
    assert isinstance(a, Use) and isinstance(w0, Use)
    rows = first.shape[0]
    sizes = [g.shape[-1] for g in members]
    total = sum(sizes)
    k = w0.shape[0]
    wleaves = [graph.leaves[g.args[1].vid] for g in members]  # type: ignore[union-attr]
    wtype = _half({"dtype": wleaves[0].dtype})
    if any(lf.dtype != wleaves[0].dtype for lf in wleaves):
        return None
    parts: list[Operand] = [Use(lf.vid, lf.shape) for lf in wleaves]
    if w0.trans:  # weights stored (n_i, k): stacked by rows
        wcat = new_node(
            graph, first, "gather", "cat", parts, (total, k), dim=0, sizes=tuple(sizes), **wtype
        )
        b_use = Use(wcat.vid, (k, total), trans=True)
    else:  # stored (k, n_i): side by side
        wcat = new_node(
            graph, first, "gather", "cat", parts, (k, total), dim=1, sizes=tuple(sizes), **wtype
        )
        b_use = Use(wcat.vid, (k, total))
    mm = new_node(graph, first, "gemm", "gemm", [a, b_use], (rows, total), **first.params)
    made = [wcat, mm]
    top = mm
    if biases:
        bcat = new_node(
            graph,
            biases[0][0],
            "gather",
            "cat",
            [b for _, b in biases],
            (total,),
            dim=0,
            sizes=tuple(sizes),
            **_half({"dtype": graph.leaves[biases[0][1].vid].dtype}),
        )
        top = new_node(
            graph,
            biases[0][0],
            "ew",
            "add",
            [Use(mm.vid, (rows, total)), Use(bcat.vid, (total,))],
            (rows, total),
            **_half(biases[0][0].params),
        )
        made = [wcat, bcat, mm, top]  # the bias before the GEMM, which may read it (epilogue)
    olds = [add.vid for add, _ in biases] if biases else [g.vid for g in members]
    storage = rows * total
    moved: dict[tuple[int, int], Use] = {}  # (node index, arg index) -> its new use
    col = 0
    for old, size in zip(olds, sizes, strict=True):
        # product i's value, as a view of the one GEMM's column range
        cols = Use(top.vid, (rows, size), strides=(total, 1), offset=col)
        col += size
        shape = graph.shape_of(old)
        base = cols if shape == cols.shape else layout.view(cols, shape)
        for i, n in enumerate(graph.nodes):
            for j, arg in enumerate(n.args):
                if isinstance(arg, Use) and arg.vid == old:
                    new = None if base is None else layout.compose(arg, base, storage)
                    if new is None:
                        return None
                    moved[(i, j)] = new
    for (i, j), new in moved.items():
        graph.nodes[i].args[j] = new
    insert_before(graph, first, made)
    return made
