"""Entries that move or merge pools: an average pool above per-channel arithmetic, two pools
that tile as one."""

from __future__ import annotations

from stitch_lsp.compiler.ir import Const, Graph, Node, Operand, Use
from stitch_lsp.compiler.rewrites.surgery import (
    Applied,
    float_ew,
    insert_before,
    int_param,
    new_node,
    only_user,
    plain_use,
    redirect,
    users_of,
)


def plain_average(p: Node) -> bool:
    """An average pool whose every window holds `kernel` counted elements (no padding, no
    clipped window): its value is linear in its input, window by window."""
    return (
        p.kind == "pool"
        and p.fn == "avg_pool"
        and "clipped" not in p.params
        and not any(int_param(p, "padding"))
        and all(d == 1 for d in int_param(p, "dilation"))
    )


def _uniform_over(a: Operand, rank: int, dims: list[int]) -> bool:
    """The same value along `dims` of a rank-`rank` result: a number, or 1 (or absent) there."""
    if isinstance(a, Const):
        return True
    aligned = (1,) * (rank - len(a.shape)) + tuple(a.shape)
    return len(aligned) == rank and all(aligned[d] == 1 for d in dims)


def pool_before_channel_affine(graph: Graph) -> list[Applied]:
    """avg_pool(u * a + b) = avg_pool(u) * a + b where a and b are the same across each window
    (numbers, scalars, per-channel vectors): the pool moves up to its producer (a transposed
    convolution, for pool_of_conv_transpose), and the arithmetic runs on the pooled pixels."""
    users = users_of(graph)
    out = []
    for p in list(graph.nodes):
        if not plain_average(p) or not plain_use(p.args[0]):
            continue
        x = p.args[0]
        assert isinstance(x, Use)
        e = graph.node(x.vid)
        if e is None or not float_ew(e) or e.fn not in ("add", "sub", "mul", "div"):
            continue
        if len(e.args) != 2 or e.shape != x.shape or only_user(graph, e.vid, users) is not p:
            continue
        rank = len(e.shape)
        # dims the pool mixes or subsamples (a window of 1 with a stride still drops pixels)
        pooled_dims = [
            2 + j
            for j, k in enumerate(int_param(p, "kernel"))
            if k > 1 or p.shape[2 + j] != e.shape[2 + j]
        ]

        spans = [
            isinstance(a, Use)
            and plain_use(a)
            and a.shape == e.shape
            and not _uniform_over(a, rank, pooled_dims)
            for a in e.args
        ]
        if spans.count(True) != 1 or not all(
            s or _uniform_over(a, rank, pooled_dims) for s, a in zip(spans, e.args, strict=True)
        ):
            continue
        at = spans.index(True)
        if e.fn == "div" and at != 0:
            continue  # a / pool(u) is not pool(a / u)
        u = e.args[at]
        assert isinstance(u, Use)
        pooled = new_node(graph, p, "pool", "avg_pool", [u], p.shape, **p.params)
        args = list(e.args)
        args[at] = Use(pooled.vid, p.shape)
        after = new_node(graph, e, "ew", e.fn, args, p.shape, **e.params)
        insert_before(graph, p, [pooled, after])
        redirect(graph, p.vid, after.vid)
        graph.nodes = [n for n in graph.nodes if n is not p and n is not e]
        out.append(
            Applied("pool_before_channel_affine", f"{p.origin} before {e.origin}", {pooled.vid})
        )
        users = users_of(graph)
    return out


def _tiling(p: Node) -> bool:
    """An average or max pool whose windows tile its input: as long as their stride, unpadded,
    undilated, every window whole (no ceil-mode window past the edge)."""
    if p.kind != "pool" or p.fn not in ("avg_pool", "max_pool") or "clipped" in p.params:
        return False
    kernel, x = int_param(p, "kernel"), p.args[0]
    if kernel != int_param(p, "stride") or any(int_param(p, "padding")) or not isinstance(x, Use):
        return False
    if any(d != 1 for d in int_param(p, "dilation")) or len(kernel) != len(x.shape) - 2:
        return False
    return all(o == i // k for o, i, k in zip(p.shape[2:], x.shape[2:], kernel, strict=True))


def pool_of_pool(graph: Graph) -> list[Applied]:
    """pool_k2(pool_k1(x)) = pool_(k1 k2)(x), both averages or both maxima, for windows that
    tile: window m of the second covers windows k2 m .. k2 m + k2 - 1 of the first, which
    cover x's k1 k2 m .. k1 k2 m + k1 k2 - 1, and floor(floor(n / k1) / k2) = floor(n / (k1
    k2)). One pass over x instead of two, and no intermediate (held-out level 2's 6 and 78,
    maxima; 72, averages once past the batch norm's arithmetic). Exact for maxima."""
    users = users_of(graph)
    out = []
    for p in list(graph.nodes):
        if not _tiling(p) or not plain_use(p.args[0]):
            continue
        x = p.args[0]
        assert isinstance(x, Use)
        first = graph.node(x.vid)
        if first is None or first.fn != p.fn or not _tiling(first) or x.shape != first.shape:
            continue
        if not plain_use(first.args[0]) or only_user(graph, first.vid, users) is not p:
            continue
        kernel = tuple(
            a * b for a, b in zip(int_param(first, "kernel"), int_param(p, "kernel"), strict=True)
        )
        merged = new_node(
            graph,
            p,
            "pool",
            p.fn,
            [first.args[0]],
            p.shape,
            **{**p.params, "kernel": kernel, "stride": kernel},
        )
        insert_before(graph, p, [merged])
        redirect(graph, p.vid, merged.vid)
        graph.nodes = [n for n in graph.nodes if n is not p and n is not first]
        out.append(Applied("pool_of_pool", f"{p.origin} after {first.origin}", {merged.vid}))
        users = users_of(graph)
    return out
