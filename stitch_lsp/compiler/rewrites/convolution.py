"""Entries that shrink a convolution: an average pool before a pointwise one, the spatial sums
of a transposed one as a smaller one, and an average pool of a transposed one as a stride-1
convolution."""

from __future__ import annotations

import math

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Const, Graph, Node, Use, numel
from stitch_lsp.compiler.rewrites.pools import plain_average
from stitch_lsp.compiler.rewrites.surgery import (
    Applied,
    axes_of,
    float_ew,
    insert_before,
    int_param,
    new_node,
    only_user,
    plain_use,
    range_sums,
    redirect,
    sum_node,
    users_of,
)


def pool_before_pointwise_conv(graph: Graph) -> list[Applied]:
    """avg_pool(conv1x1(z)) as conv1x1(avg_pool(z)), as torch.compile does for DenseNet's
    transition: both are linear, a 1x1 convolution without bias mixes channels pixel by pixel
    and an unpadded average mixes pixels channel by channel, so they commute, and the
    convolution then runs on a quarter (for 2x2) of the pixels. A convolution that something
    else reads stays, and the pooled branch gets its own small one."""
    out = []
    for p in list(graph.nodes):
        if p.kind != "pool" or p.fn != "avg_pool" or "clipped" in p.params:
            continue
        if any(int_param(p, "padding")):
            continue
        x = p.args[0]
        node = graph.node(x.vid) if isinstance(x, Use) else None
        if node is None or node.kind != "conv" or node.fn not in ("conv1d", "conv2d", "conv3d"):
            continue
        assert isinstance(x, Use)
        if x.shape != node.shape or not plain_use(x):
            continue
        z, w = node.args[0], node.args[1]
        if not isinstance(z, Use) or not isinstance(w, Use) or len(node.args) != 2:
            continue
        stride, padding = node.params.get("stride", ()), node.params.get("padding")
        one = isinstance(stride, tuple) and all(int(v) == 1 for v in stride)
        unpadded = padding == "valid" or (isinstance(padding, tuple) and not any(padding))
        if not (one and unpadded and all(int(v) == 1 for v in w.shape[2:])):
            continue
        pooled = new_node(
            graph, p, "pool", "avg_pool", [z], (*z.shape[:2], *p.shape[2:]), **p.params
        )
        conv = new_node(
            graph, node, "conv", node.fn, [Use(pooled.vid, pooled.shape), w], p.shape, **node.params
        )
        insert_before(graph, p, [pooled, conv])
        redirect(graph, p.vid, conv.vid)
        graph.nodes.remove(p)
        out.append(
            Applied(
                "pool_before_pointwise_conv",
                f"{p.origin} after {node.origin}",
                {pooled.vid, conv.vid},
            )
        )
    return out


def _lone_conv_transpose(
    graph: Graph, conv: Node | None, reader: Node, users: dict[int, list[Node]]
) -> tuple[Use, Use] | None:
    """(x, W) of a float32, ungrouped, bias-free transposed convolution that only `reader`
    reads, both operands plain: the shape the transposed-convolution entries rewrite."""
    if conv is None or conv.kind != "conv" or not conv.fn.startswith("conv_transpose"):
        return None
    if only_user(graph, conv.vid, users) is not reader or len(conv.args) != 2:
        return None
    if int(conv.params.get("groups", 1) or 1) != 1 or conv.dtype != "float32":  # type: ignore[call-overload]
        return None
    x, w = conv.args
    if not isinstance(x, Use) or not isinstance(w, Use) or not plain_use(x) or not plain_use(w):
        return None
    return x, w


def _tap_ranges(
    length: int, out: int, kernel: int, stride: int, pad: int, dilation: int
) -> list[tuple[int, int]]:
    """For each tap k of one transposed-convolution dim, the input positions [lo, hi) whose
    output o = i stride - pad + k dilation lands inside [0, out); padding crops the border."""
    ranges = []
    for k in range(kernel):
        first = pad - k * dilation
        lo = max(0, -(-first // stride))
        hi = min(length, (out - 1 + first) // stride + 1)
        ranges.append((lo, max(lo, hi)))
    return ranges


def spatial_sum_of_conv_transpose(graph: Graph) -> list[Applied]:
    """sum over leading spatial dims of conv_transpose(x, W) + b = conv_transpose over the
    other dims of (x's per-tap sums, W with those taps as input channels) + n b.

    An output position o of a transposed convolution's dim takes input i through tap k when
    o = i s - p + k d, so summing the output over that dim gives, for each tap, the sum of x over
    the input positions whose tap-k output stays inside: a range, the whole dim when nothing
    is padded. The summed dims' taps then become input channels (x's range sums stacked per
    tap, W permuted to match) of a transposed convolution over the dims that remain, or a GEMM
    when none remain; taps with the whole range share one sum. Fires on held-out level 2's
    42 (unpadded global mean: a GEMM of the pixel sums and tap sums), 44 (padded, strided
    global mean) and 13 (a depth mean of a padded ConvTranspose3d: a ConvTranspose2d with
    3 x C_in input channels, 1/32 of the FLOPs)."""
    users = users_of(graph)
    out = []
    for r in list(graph.nodes):
        if r.kind != "reduce" or r.fn != "sum" or not plain_use(r.args[0]):
            continue
        u = r.args[0]
        assert isinstance(u, Use)
        rank = len(u.shape)
        m = len(axes_of(r))
        if rank not in (3, 4, 5) or m < 1 or axes_of(r) != tuple(range(2, 2 + m)):
            continue
        terms: list[tuple[str, Use]] = []
        chain: list[Node] = []
        cur, reader = u, r
        conv = None
        while True:
            node = graph.node(cur.vid)
            if node is None:
                break
            if node.kind == "conv":
                conv = node
                break
            if (
                node.fn not in ("add", "sub")
                or not float_ew(node)
                or len(node.args) != 2
                or only_user(graph, node.vid, users) is not reader
            ):
                break
            a, b = node.uses
            if node.fn == "add" and a.vid in graph.leaves and b.vid not in graph.leaves:
                a, b = b, a
            lf = graph.leaves.get(b.vid)
            channels = u.shape[1]
            if lf is None or numel(lf.shape) != channels or not plain_use(a) or a.shape != u.shape:
                break
            if tuple(d for d in b.shape if d != 1) != (channels,) or b.shape[-rank + 1 :][0] != (
                channels
            ):
                break
            terms.append((node.fn, b))
            chain.append(node)
            cur, reader = a, node
        operands = _lone_conv_transpose(graph, conv, reader, users)
        if conv is None or operands is None or cur.shape != conv.shape:
            continue
        x, w = operands
        spatial = rank - 2
        per_dim = {
            key: int_param(conv, key) or (default,) * spatial
            for key, default in (
                ("stride", 1),
                ("padding", 0),
                ("dilation", 1),
                ("output_padding", 0),
            )
        }
        if any(len(v) != spatial for v in per_dim.values()):
            continue
        ranges = [
            _tap_ranges(
                x.shape[2 + j],
                conv.shape[2 + j],
                w.shape[2 + j],
                per_dim["stride"][j],
                per_dim["padding"][j],
                per_dim["dilation"][j],
            )
            for j in range(m)
        ]
        if any(lo >= hi for rs in ranges for lo, hi in rs):
            continue  # a tap that lands nowhere: rare enough to leave alone
        whole = [all(rg == (0, x.shape[2 + j]) for rg in rs) for j, rs in enumerate(ranges)]
        taps = [1 if whole[j] else w.shape[2 + j] for j in range(m)]
        if math.prod(x.shape[2 : 2 + m]) < 2 * math.prod(taps):
            continue  # no fewer FLOPs
        made: list[Node] = []
        # x's sums: the dims every tap reads whole in one pass, then one sum per distinct
        # tap range of each cropped dim, stacked along it
        xs = x
        full_axes = tuple(2 + j for j in range(m) if whole[j])
        if full_axes:
            keep = tuple(1 if a in full_axes else d for a, d in enumerate(x.shape))
            total = sum_node(graph, conv, x, full_axes, keep)
            made.append(total)
            xs = Use(total.vid, keep)
        for j in (j for j in range(m) if not whole[j]):
            xs = range_sums(graph, conv, xs, 2 + j, ranges[j], made)
        # W: summed over the taps that share the whole range, the summed dims' taps moved
        # next to C_in (they are input channels now)
        ws = w
        if full_axes:
            wshape = tuple(1 if a in full_axes else d for a, d in enumerate(w.shape))
            wsum = sum_node(graph, conv, w, full_axes, wshape)
            made.append(wsum)
            ws = Use(wsum.vid, wshape)
        order = (0, *range(2, 2 + m), 1, *range(2 + m, rank))
        moved = layout.permute(ws, order)
        if moved.strided:
            copy = new_node(graph, conv, "ew", "identity", [moved], moved.shape)
            made.append(copy)
            moved = Use(copy.vid, moved.shape)
        batch, c_in, c_out = x.shape[0], x.shape[1], conv.shape[1]
        channels_in = c_in * math.prod(taps)
        kept_out = conv.shape[2 + m :]
        result = (batch, c_out, *kept_out)
        a_use = Use(xs.vid, (batch, channels_in, *x.shape[2 + m :]))
        w_use = Use(moved.vid, (channels_in, c_out, *w.shape[2 + m :]))
        if not kept_out:
            heavy = new_node(graph, conv, "gemm", "gemm", [a_use, w_use], result, batch=1)
        else:
            params = dict(conv.params)
            params.update({k: v[m:] for k, v in per_dim.items()})
            heavy = new_node(
                graph,
                conv,
                "conv",
                f"conv_transpose{len(kept_out)}d",
                [a_use, w_use],
                result,
                **params,
            )
        made.append(heavy)
        last = heavy
        positions = math.prod(conv.shape[2 : 2 + m])
        vec_shape = (c_out, *([1] * len(kept_out)))
        for fn, vec in reversed(terms):  # each vector once per summed output position
            scaled = new_node(
                graph, r, "ew", "mul", [Use(vec.vid, vec_shape), Const(float(positions))], vec_shape
            )
            last = new_node(
                graph,
                r,
                "ew",
                fn,
                [Use(last.vid, result), Use(scaled.vid, vec_shape)],
                result,
            )
            made += [scaled, last]
        insert_before(graph, r, made)
        redirect(graph, r.vid, last.vid)
        graph.nodes = [n for n in graph.nodes if n is not r and n is not conv and n not in chain]
        cropped = sum(not f for f in whole)
        out.append(
            Applied(
                "spatial_sum_of_conv_transpose",
                f"{r.origin} over {conv.origin}"
                + (f" ({cropped} padded dim(s) summed per tap)" if cropped else "")
                + (f" (with {len(terms)} per-channel vector(s))" if terms else ""),
                {n.vid for n in made},
            )
        )
        users = users_of(graph)
    return out


def pool_of_conv_transpose(graph: Graph) -> list[Applied]:
    """avg_pool_k(conv_transpose_k(x, W)) = conv(x, V) with V's taps the means of W's taps
    that land in one window.

    With pool windows as long as the transposed convolution's stride k, each window holds
    one output of each phase, so tap t of input i lands in window m exactly when
    i = m + delta_t, delta_t = -floor((t d - p) / k): the pooled output is a stride-1
    convolution of x (zero outside it, as the transposed convolution reads it) whose taps
    are W's taps summed by delta and divided by the window's size. Held-out level 2's
    50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling: a 2x2x2 convolution at the pooled
    size instead of a 3x3x3 transposed one that writes 8 times as many pixels."""
    users = users_of(graph)
    out = []
    for p in list(graph.nodes):
        if not plain_average(p) or not plain_use(p.args[0]):
            continue
        y = p.args[0]
        assert isinstance(y, Use)
        conv = graph.node(y.vid)
        operands = _lone_conv_transpose(graph, conv, p, users)
        if conv is None or operands is None:
            continue
        x, w = operands
        n = len(x.shape) - 2
        kernel, pstride = int_param(p, "kernel"), int_param(p, "stride")
        cstride, cpad, cdil = (
            int_param(conv, "stride"),
            int_param(conv, "padding"),
            int_param(conv, "dilation"),
        )
        if not (len(kernel) == len(pstride) == len(cstride) == len(cpad) == len(cdil) == n):
            continue
        if kernel != pstride or kernel != cstride:
            continue
        plan: list[tuple[int, int, list[tuple[int, int]], int, int]] = []
        for j in range(n):
            k, d, crop, taps = kernel[j], cdil[j], cpad[j], w.shape[2 + j]
            deltas = [-((t * d - crop) // k) for t in range(taps)]
            low = min(deltas)
            width = max(deltas) - low + 1
            # each kernel position's taps: a run (delta falls as t grows)
            at = [[t for t in range(taps) if deltas[t] == low + pos] for pos in range(width)]
            length, pooled = x.shape[2 + j], p.shape[2 + j]
            if not all(at) or pooled != conv.shape[2 + j] // k:
                break  # a position no tap reaches (dilation past the stride)
            plan.append((low, width, [(r[0], r[-1] + 1) for r in at], length, pooled))
        if len(plan) != n:
            continue
        if math.prod(q[1] for q in plan) > math.prod(w.shape[2:]):
            continue
        made: list[Node] = []
        # x: cut or zero-padded so that output m reads x[m + low ...]
        cut = x
        before, after = [0, 0], [0, 0]
        for j, (low, width, _runs, length, pooled) in enumerate(plan):
            need = pooled + width - 1
            lo_cut, lo_pad = max(0, low), max(0, -low)
            hi_pad = need - lo_pad - (length - lo_cut)
            hi_cut = max(0, -hi_pad)
            cut = layout.slice_(cut, 2 + j, lo_cut, length - hi_cut)
            before.append(lo_pad)
            after.append(max(0, hi_pad))
        padding: tuple[int, ...] = (0,) * n
        xin = cut
        if before == after:
            padding = tuple(before[2:])
            if xin.strided:
                copy = new_node(graph, conv, "ew", "identity", [xin], xin.shape)
                made.append(copy)
                xin = Use(copy.vid, xin.shape)
        else:
            padded = tuple(dim + b + a for dim, b, a in zip(xin.shape, before, after, strict=True))
            pad = new_node(
                graph, conv, "gather", "pad", [xin], padded, before=tuple(before), value=0.0
            )
            made.append(pad)
            xin = Use(pad.vid, padded)
        # V: W's taps summed per kernel position (positions in rising delta), as (out, in, ...)
        wv = w
        for j, (_low, _width, runs, _length, _pooled) in enumerate(plan):
            wv = range_sums(graph, conv, wv, 2 + j, runs, made)
        swapped = layout.permute(wv, (1, 0, *range(2, n + 2)))
        v = new_node(
            graph, conv, "ew", "mul", [swapped, Const(1.0 / math.prod(kernel))], swapped.shape
        )
        made.append(v)
        params = {
            key: val
            for key, val in conv.params.items()
            if key not in ("stride", "padding", "dilation", "output_padding")
        }
        params.update(stride=(1,) * n, padding=padding, dilation=(1,) * n)
        heavy = new_node(
            graph, conv, "conv", f"conv{n}d", [xin, Use(v.vid, v.shape)], p.shape, **params
        )
        made.append(heavy)
        insert_before(graph, p, made)
        redirect(graph, p.vid, heavy.vid)
        graph.nodes = [q for q in graph.nodes if q is not p and q is not conv]
        out.append(
            Applied(
                "pool_of_conv_transpose", f"{p.origin} over {conv.origin}", {q.vid for q in made}
            )
        )
        users = users_of(graph)
    return out
