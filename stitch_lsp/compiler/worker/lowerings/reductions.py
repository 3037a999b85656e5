"""Reductions: sums and means, extrema, arg-extrema, softmax, logsumexp, scans, norms."""

from __future__ import annotations

from typing import Any

import torch.fx

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
    dim = cx.arg(n, 1, "dim", () if cx.level == "aten" else None)
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
