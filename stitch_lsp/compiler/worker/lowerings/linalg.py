"""GEMMs, convolutions, attention and embeddings: the heavy ops."""

from __future__ import annotations

import math
from typing import Any

import torch.fx

from stitch_lsp.compiler.ir import Unsupported, Use
from stitch_lsp.compiler.worker.converter import Converter
from stitch_lsp.compiler.worker.lowering import register_lowering


@register_lowering("matmul")
def matmul(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.matmul(cx.val(n.args[0]), cx.val(n.args[1]))


@register_lowering("linear")
def linear(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.linear(cx.tensor(n), cx.arg(n, 1, "weight"), cx.arg(n, 2, "bias"))


@register_lowering("addmm")
def addmm(cx: Converter, n: torch.fx.Node) -> Any:
    bias, m1, m2, beta, alpha = cx.args(
        n, ("input", None), ("mat1", None), ("mat2", None), ("beta", 1), ("alpha", 1)
    )
    return cx.b.addmm(bias, m1, m2, beta, alpha)


@register_lowering("baddbmm", path="aten")
def baddbmm(cx: Converter, n: torch.fx.Node) -> Any:
    b = cx.b
    bias, m1, m2 = (cx.val(a) for a in n.args[:3])
    beta, alpha = cx.val(n.kwargs.get("beta", 1)), cx.val(n.kwargs.get("alpha", 1))
    prod = b.matmul(m1, m2)
    if alpha != 1:
        prod = b.ew("mul", [prod, b.operand(float(alpha))], shape=prod.shape)
    if beta == 0:
        return prod
    term = b.operand(bias)
    if beta != 1:
        term = b.ew("mul", [term, b.operand(float(beta))])
    return b.ew("add", [prod, term], shape=prod.shape)


@register_lowering("einsum", path="fx")
def einsum(cx: Converter, n: torch.fx.Node) -> Any:
    raise Unsupported(f"{cx.desc(n)}: einsum is captured at the ATen level")


@register_lowering("conv", path="aten")
def convolution(cx: Converter, n: torch.fx.Node) -> Any:
    u, w, bias, stride, pad, dil, transposed, out_pad, groups = cx.args(
        n,
        ("input", None),
        ("weight", None),
        ("bias", None),
        ("stride", 1),
        ("padding", 0),
        ("dilation", 1),
        ("transposed", False),
        ("output_padding", 0),
        ("groups", 1),
    )
    return cx.b.conv(
        u,
        w,
        bias,
        stride=stride,
        padding=pad,
        dilation=dil,
        groups=int(groups),
        transposed=bool(transposed),
        output_padding=out_pad,
        out=cx.out_shape(n),  # type: ignore[arg-type]
    )


@register_lowering("scaled_dot_product_attention", path="fx")
def attention(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.attention(
        cx.tensor(n),
        cx.tensor(n, 1, "key"),
        cx.tensor(n, 2, "value"),
        cx.arg(n, 3, "attn_mask"),
        bool(cx.arg(n, 5, "is_causal", False)),
        cx.arg(n, 6, "scale"),
        float(cx.arg(n, 4, "dropout_p", 0.0)),
        gqa=bool(cx.arg(n, 7, "enable_gqa", False)),
    )


@register_lowering("scaled_dot_product_attention", path="aten")
def attention_aten(cx: Converter, n: torch.fx.Node) -> Any:
    """The whole sdpa call that `capture_attention` keeps as one node of the ATen trace."""
    q, k, v, mask, dropout, causal, scale, gqa = cx.args(
        n,
        ("query", None),
        ("key", None),
        ("value", None),
        ("attn_mask", None),
        ("dropout_p", 0.0),
        ("is_causal", False),
        ("scale", None),
        ("enable_gqa", False),
    )
    for t in (q, k, v):
        if not isinstance(t, Use):
            raise Unsupported(f"{cx.desc(n)}: expected tensor query, key and value")
    return cx.b.attention(q, k, v, mask, bool(causal), scale, float(dropout), gqa=bool(gqa))


@register_lowering("embedding", path="aten")
def embedding_aten(cx: Converter, n: torch.fx.Node) -> Any:
    """`aten.embedding(weight, indices)`: indices given to forward, or made in PyTorch (position
    ids from an arange): either way a stored int64 tensor that the gather kernel reads."""
    weight, ids = cx.tensor(n, 0, "weight"), cx.tensor(n, 1, "indices")
    return _rows(cx, n, weight, ids, "embedding indices")


def _rows(cx: Converter, n: torch.fx.Node, table: Use, ids: Use, what: str) -> Use:
    """Rows of a 2-D table picked by a stored int64 tensor: one given to forward (checked by
    the builder's embedding) or one made in PyTorch, which the gather kernel reads."""
    if ids.vid in cx.g.leaves:
        return cx.b.embedding(table, ids)
    made = cx.g.node(ids.vid)
    if made is None or made.kind != "aten" or made.dtype != "int64" or len(table.shape) != 2:
        raise Unsupported(f"{cx.desc(n)}: {what} computed by generated kernels")
    return cx.b.add("gather", "embedding", [table, ids], (*ids.shape, table.shape[1]))


@register_lowering("index_rows", path="aten")
def index_rows(cx: Converter, n: torch.fx.Node) -> Any:
    """`aten.index.Tensor(table, [ids])`: whole rows of a contiguous table picked by one int64
    tensor along dim 0, as an embedding gather over the table viewed as (rows, rest)."""
    table = cx.tensor(n, 0, "self")
    indices = n.args[1] if len(n.args) > 1 else n.kwargs.get("indices")
    if not isinstance(indices, (list, tuple)) or len(indices) != 1 or indices[0] is None:
        raise Unsupported(f"{cx.desc(n)}: indexing other than rows by one tensor")
    ids = cx.val(indices[0])
    if not isinstance(ids, Use) or cx.b.dtype_of(ids.vid) != "int64":
        raise Unsupported(f"{cx.desc(n)}: rows picked by something other than an int64 tensor")
    if table.strided or table.trans or not table.shape:
        raise Unsupported(f"{cx.desc(n)}: rows of a strided table")
    rows, rest = table.shape[0], tuple(table.shape[1:])
    picked = _rows(cx, n, Use(table.vid, (rows, math.prod(rest))), ids, "row indices")
    return Use(picked.vid, (*ids.shape, *rest))


@register_lowering("embedding", path="fx")
def embedding(cx: Converter, n: torch.fx.Node) -> Any:
    if cx.arg(n, 3, "max_norm") is not None:
        raise Unsupported(f"{cx.desc(n)}: embedding with max_norm renormalises weights")
    return cx.b.embedding(cx.arg(n, 1, "weight"), cx.tensor(n))
