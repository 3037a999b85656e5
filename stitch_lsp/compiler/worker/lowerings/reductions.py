"""Reductions: sums and means, extrema, arg-extrema, softmax, logsumexp, scans, norms."""

from __future__ import annotations

from typing import Any

import torch.fx

from stitch_lsp.compiler.builder import dims_of
from stitch_lsp.compiler.ir import Unsupported, Use
from stitch_lsp.compiler.worker.converter import Converter
from stitch_lsp.compiler.worker.lowering import register_lowering


def _no_dtype(cx: Converter, n: torch.fx.Node) -> None:
    if n.kwargs.get("dtype") is not None:
        raise Unsupported(f"{cx.desc(n)}: reductions with a dtype are not supported")


@register_lowering("sum")
def sum_(cx: Converter, n: torch.fx.Node) -> Any:
    _no_dtype(cx, n)
    dim, keep = cx.arg(n, 1, "dim"), cx.arg(n, 2, "keepdim", False)
    return cx.b.sum_mean(cx.tensor(n), dim, bool(keep), "sum")


@register_lowering("mean")
def mean(cx: Converter, n: torch.fx.Node) -> Any:
    _no_dtype(cx, n)
    dim, keep = cx.arg(n, 1, "dim"), cx.arg(n, 2, "keepdim", False)
    return cx.b.sum_mean(cx.tensor(n), dim, bool(keep), "mean")


@register_lowering("amax")
def amax(cx: Converter, n: torch.fx.Node) -> Any:
    """amax/amin: the extremum over dims, no indices (`torch.amax(x, 1)`)."""
    kind = cx.spelled(n)[1:]
    x = cx.tensor(n)
    dim = cx.arg(n, 1, "dim")  # None and () both mean every dim
    if isinstance(dim, Use):
        return cx.b.binary("maximum" if kind == "max" else "minimum", x, dim)
    return cx.b.minmax(x, dim, bool(cx.arg(n, 2, "keepdim", False)), kind, pair=False)


@register_lowering("max")
def max_(cx: Converter, n: torch.fx.Node) -> Any:
    """max/min: of two tensors, of all elements, or along a dim as (values, indices)."""
    kind = cx.spelled(n)
    x = cx.tensor(n)
    other = cx.arg(n, 1, "dim")
    if isinstance(other, Use):
        return cx.b.binary("maximum" if kind == "max" else "minimum", x, other)
    if other is None:
        return cx.b.minmax(x, None, False, kind, pair=False)
    return cx.b.minmax(x, other, bool(cx.arg(n, 2, "keepdim", False)), kind, pair=True)


@register_lowering("argmax")
def argmax(cx: Converter, n: torch.fx.Node) -> Any:
    dim, keep = cx.arg(n, 1, "dim"), cx.arg(n, 2, "keepdim", False)
    return cx.b.argminmax(cx.tensor(n), dim, bool(keep), cx.spelled(n))


@register_lowering("logsumexp")
def logsumexp(cx: Converter, n: torch.fx.Node) -> Any:
    dim, keep = cx.arg(n, 1, "dim"), cx.arg(n, 2, "keepdim", False)
    return cx.b.logsumexp(cx.tensor(n), dim, bool(keep))


@register_lowering("cumsum")
def cumsum(cx: Converter, n: torch.fx.Node) -> Any:
    if n.kwargs.get("dtype") is not None:
        raise Unsupported(f"{cx.desc(n)}: cumsum with a dtype is not supported")
    return cx.b.cumsum(cx.tensor(n), int(cx.arg(n, 1, "dim")))


@register_lowering("softmax")
def softmax(cx: Converter, n: torch.fx.Node) -> Any:
    name = cx.spelled(n)
    return cx.b.softmax(
        cx.tensor(n), cx.arg(n, 1, "dim"), log="log" in name, safe=name == "_safe_softmax"
    )


@register_lowering("vector_norm", path="aten")
def vector_norm(cx: Converter, n: torch.fx.Node) -> Any:
    b = cx.b
    u, ord_, dim, keep = cx.args(n, ("self", None), ("ord", 2), ("dim", None), ("keepdim", False))
    if float(ord_) != 2.0 or n.kwargs.get("dtype") is not None:
        raise Unsupported(f"{cx.desc(n)}: only the 2-norm is supported")
    sq = b.ew("square", [b.plain(u)], shape=u.shape)
    total = b.sum_mean(sq, dim, bool(keep), "sum")
    return b.ew("sqrt", [total], shape=total.shape)


@register_lowering("var")
def var(cx: Converter, n: torch.fx.Node) -> Any:
    """var/std in two passes over the reduced dims (mean, then the mean square deviation),
    fp32 throughout; `correction` (or `unbiased`) as torch reads it, in every spelling."""
    b, x = cx.b, cx.tensor(n)
    dim = cx.arg(n, 1, "dim")
    unbiased = cx.val(n.kwargs.get("unbiased", True))
    keepdim = cx.val(n.kwargs.get("keepdim", False))
    if isinstance(dim, bool):  # var(x, unbiased)
        dim, unbiased = None, dim
    elif len(n.args) > 2:  # var(x, dim, unbiased, keepdim)
        unbiased = cx.val(n.args[2])
        keepdim = cx.val(n.args[3]) if len(n.args) > 3 else keepdim
    correction = cx.val(n.kwargs.get("correction"))
    correction = float((1 if unbiased else 0) if correction is None else correction)
    axes = dims_of(dim, len(x.shape))
    count = 1
    for a in axes:
        count *= x.shape[a]
    if count - correction <= 0:
        raise Unsupported(f"{cx.desc(n)}: {count} elements with correction {correction:g}")
    mean = b.sum_mean(x, axes, True, "mean")
    dev = b.ew("sub", [b.plain(x), mean], shape=x.shape)
    total = b.sum_mean(b.ew("square", [dev], shape=x.shape), axes, bool(keepdim), "sum")
    out = b.ew("mul", [total, b.operand(1.0 / (count - correction))], shape=total.shape)
    return b.ew("sqrt", [out], shape=out.shape) if cx.spelled(n) == "std" else out
