"""Views: reshapes, permutations, slices and splits (no data moves once fused)."""

from __future__ import annotations

from typing import Any

import torch.fx

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.recurrent import index_result
from stitch_lsp.compiler.worker.converter import Converter
from stitch_lsp.compiler.worker.lowering import register_lowering


def _is_method(n: torch.fx.Node) -> bool:
    return n.op == "call_method"


@register_lowering("view")
def view(cx: Converter, n: torch.fx.Node) -> Any:
    x = cx.tensor(n)
    if _is_method(n):
        shape = cx.sizes(n, 1, "shape") or cx.val(n.kwargs.get("size"))
    else:
        shape = cx.arg(n, 1, "shape")
    return cx.b.view(x, shape)


@register_lowering("view_as", path="fx")
def view_as(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.view(cx.tensor(n), cx.val(n.args[1]).shape)


@register_lowering("flatten", path="fx")
def flatten(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.flatten(cx.tensor(n), cx.arg(n, 1, "start_dim", 0), cx.arg(n, 2, "end_dim", -1))


@register_lowering("alias", path="aten")
def alias_aten(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.val(n.args[0])


@register_lowering("alias", path="fx")
def alias(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.tensor(n)


@register_lowering("permute")
def permute(cx: Converter, n: torch.fx.Node) -> Any:
    dims = cx.sizes(n, 1, "dims") if _is_method(n) else cx.arg(n, 1, "dims")
    return cx.b.permute(cx.tensor(n), dims)


@register_lowering("transpose")
def transpose(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.transpose(cx.tensor(n), cx.arg(n, 1, "dim0"), cx.arg(n, 2, "dim1"))


@register_lowering("t")
def t(cx: Converter, n: torch.fx.Node) -> Any:
    u = cx.tensor(n)
    return cx.b.mT(u) if len(u.shape) == 2 else u


@register_lowering("expand")
def expand(cx: Converter, n: torch.fx.Node) -> Any:
    shape = cx.sizes(n, 1, "size") if _is_method(n) else cx.val(n.args[1])
    return layout.expand(cx.tensor(n), tuple(int(d) for d in shape))


@register_lowering("expand_as", path="fx")
def expand_as(cx: Converter, n: torch.fx.Node) -> Any:
    return layout.expand(cx.tensor(n), cx.val(n.args[1]).shape)


@register_lowering("unsqueeze")
def unsqueeze(cx: Converter, n: torch.fx.Node) -> Any:
    return layout.unsqueeze(cx.tensor(n), int(cx.arg(n, 1, "dim")))


@register_lowering("squeeze")
def squeeze(cx: Converter, n: torch.fx.Node) -> Any:
    d = cx.arg(n, 1, "dim")
    return layout.squeeze(
        cx.tensor(n), None if d is None else (d,) if isinstance(d, int) else tuple(d)
    )


@register_lowering("narrow")
def narrow(cx: Converter, n: torch.fx.Node) -> Any:
    dim, start, length = cx.arg(n, 1, "dim", 0), cx.arg(n, 2, "start", 0), cx.arg(n, 3, "length", 0)
    return layout.slice_(cx.tensor(n), dim, start, start + length)


@register_lowering("slice", path="aten")
def slice_(cx: Converter, n: torch.fx.Node) -> Any:
    u, dim, start, end, step = cx.args(
        n, ("self", None), ("dim", 0), ("start", None), ("end", None), ("step", 1)
    )
    return layout.slice_(u, dim, start, end, step)


@register_lowering("select", path="aten")
def select(cx: Converter, n: torch.fx.Node) -> Any:
    u, dim, i = cx.tensor(n), int(cx.val(n.args[1])), int(cx.val(n.args[2]))
    picked = index_result(cx.g, u, (slice(None),) * (dim % len(u.shape)) + (i,))
    return picked if picked is not None else layout.select(u, dim, i)


@register_lowering("split")
def split(cx: Converter, n: torch.fx.Node) -> Any:
    size = cx.arg(n, 1, "split_size")
    if size is None:
        size = cx.val(n.kwargs.get("split_size_or_sections"))
    return cx.b.split(cx.tensor(n), size, cx.arg(n, 2, "dim", 0))


@register_lowering("chunk")
def chunk(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.chunk(cx.tensor(n), cx.arg(n, 1, "chunks", 1), cx.arg(n, 2, "dim", 0))


@register_lowering("unbind")
def unbind(cx: Converter, n: torch.fx.Node) -> Any:
    u, dim = cx.tensor(n), cx.arg(n, 1, "dim", 0)
    return [layout.select(u, dim, i) for i in range(u.shape[dim])]


@register_lowering("unfold")
def unfold(cx: Converter, n: torch.fx.Node) -> Any:
    dim, size, step = cx.arg(n, 1, "dimension", 0), cx.arg(n, 2, "size", 1), cx.arg(n, 3, "step", 1)
    return layout.unfold(cx.tensor(n), int(dim), int(size), int(step))


@register_lowering("relative_position_bias", path="fx")
def relative_position_bias(cx: Converter, n: torch.fx.Node) -> Any:
    """torchvision Swin's bias: the table gathered by its index buffer, as (1, heads, N, N)."""
    table, index, window = (
        cx.tensor(n),
        cx.arg(n, 1, "relative_position_index"),
        cx.arg(n, 2, "window_size"),
    )
    count = int(window[0]) * int(window[1])
    bias = cx.b.view(cx.b.index(table, index), [count, count, -1])
    return layout.unsqueeze(cx.b.contiguous(cx.b.permute(bias, [2, 0, 1])), 0)
