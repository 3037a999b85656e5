"""Ops that move or make data: copies, joins, padding, fills, conversions, random numbers."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Unsupported, Use
from stitch_lsp.compiler.worker.converter import Converter, shape_or_none
from stitch_lsp.compiler.worker.lowering import register_lowering
from stitch_lsp.compiler.worker.recurrent_capture import factory_leaf


@register_lowering("contiguous")
def contiguous(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.contiguous(cx.tensor(n))


_FLOATS = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@register_lowering("to", path="aten")
def to_aten(cx: Converter, n: torch.fx.Node) -> Any:
    b, u = cx.b, cx.tensor(n)
    dtype = n.kwargs.get("dtype")
    have = b.dtype_of(u.vid)
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise Unsupported(f"{cx.desc(n)}: a conversion to {dtype!r}")
    if dtype in (None, torch.float32) and have == "bool":
        return b.ew("identity", [b.plain(u, broadcast=False)], shape=u.shape, dtype="float32")
    if dtype is None or _FLOATS.get(dtype) == have:
        return u
    if dtype in _FLOATS and have in _FLOATS.values():
        # Between float types: one copy, stored in the target type (registers stay float).
        return b.ew("identity", [b.plain(u, broadcast=False)], shape=u.shape, dtype=_FLOATS[dtype])
    if dtype == torch.bool and have == "bool":
        return u
    raise Unsupported(f"{cx.desc(n)}: a conversion to {dtype} is not supported")


@register_lowering("to", path="fx")
def to(cx: Converter, n: torch.fx.Node) -> Any:
    x = cx.tensor(n)
    rest = [cx.val(v) for v in n.args[1:]]
    if any(isinstance(v, torch.dtype) and v != torch.float32 for v in rest):
        raise Unsupported(f"{cx.desc(n)}: a dtype conversion is not supported")
    return x


@register_lowering("repeat")
def repeat(cx: Converter, n: torch.fx.Node) -> Any:
    reps = cx.sizes(n, 1, "repeats") if n.op == "call_method" else cx.val(n.args[1])
    return cx.b.repeat(cx.tensor(n), tuple(int(r) for r in reps))


@register_lowering("cat")
def cat(cx: Converter, n: torch.fx.Node) -> Any:
    tensors, dim = cx.args(n, ("tensors", None), ("dim", 0))
    return cx.b.cat(list(tensors), dim)


@register_lowering("stack")
def stack(cx: Converter, n: torch.fx.Node) -> Any:
    tensors, dim = cx.args(n, ("tensors", None), ("dim", 0))
    return cx.b.stack(list(tensors), dim)


@register_lowering("roll")
def roll(cx: Converter, n: torch.fx.Node) -> Any:
    u, shifts, dims = cx.args(n, ("self", None), ("shifts", ()), ("dims", None))
    return cx.b.roll(u, shifts, dims)


@register_lowering("pad", path="aten")
def pad_aten(cx: Converter, n: torch.fx.Node) -> Any:
    u, pads, value = cx.args(n, ("self", None), ("pad", ()), ("value", 0.0))
    return cx.b.pad(u, pads, float(value))


@register_lowering("pad", path="fx")
def pad(cx: Converter, n: torch.fx.Node) -> Any:
    mode = cx.arg(n, 2, "mode", "constant")
    if mode != "constant":
        raise Unsupported(f"{cx.desc(n)}: padding mode {mode!r} is not supported")
    return cx.b.pad(cx.tensor(n), cx.arg(n, 1, "pad"), float(cx.arg(n, 3, "value", 0.0) or 0.0))


@register_lowering("masked_fill")
def masked_fill(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.masked_fill(cx.tensor(n), cx.arg(n, 1, "mask"), cx.arg(n, 2, "value"))


@register_lowering("copy", path="aten")
def copy_aten(cx: Converter, n: torch.fx.Node) -> Any:
    from stitch_lsp.compiler.worker.capture_aten import AtenConverter

    assert isinstance(cx, AtenConverter)
    dst, src = n.args[0], cx.val(n.args[1])
    if not (isinstance(dst, torch.fx.Node) and dst.op == "placeholder"):
        raise Unsupported(f"{cx.desc(n)}: copy_ into a computed tensor is not supported")
    leaf = cx.env[dst]
    target = cx.g.leaves.get(leaf.vid)
    if target is None or target.path not in cx.plain:
        what = target.expr if target is not None else "an input"
        raise Unsupported(f"{cx.desc(n)}: an in-place update of {what}")
    value = cx.b.contiguous(layout.expand(cx.b.tensor(src), leaf.shape))
    cx.env[dst] = value
    return value


@register_lowering("copy", path="fx")
def copy(cx: Converter, n: torch.fx.Node) -> Any:
    from stitch_lsp.compiler.worker.capture_fx import FxConverter

    assert isinstance(cx, FxConverter)
    return cx.copy_(n, cx.tensor(n), cx.val(n.args[1]))


def _filled(cx: Converter, n: torch.fx.Node, value: float, shape: Any) -> Use:
    dtype = n.kwargs.get("dtype")
    out = cx.b.fill(value, shape)
    if dtype == torch.bool or dtype in (torch.bfloat16, torch.float16):
        node = cx.g.node(out.vid)
        assert node is not None
        node.params["dtype"] = str(dtype).removeprefix("torch.")  # a float constant in registers
    elif dtype not in (None, torch.float32):
        raise Unsupported(f"{cx.desc(n)}: a {dtype} tensor is not supported")
    return out


@register_lowering("fill", path="aten")
def fill_aten(cx: Converter, n: torch.fx.Node) -> Any:
    name = cx.spelled(n)
    shape = shape_or_none(n)
    assert shape is not None
    if name.startswith("ones") or name == "new_ones":
        v = 1.0
    elif name.startswith("zeros") or name == "new_zeros":
        v = 0.0
    elif name == "scalar_tensor":
        v = float(cx.val(n.args[0]))
    else:
        v = float(cx.val(n.args[1]))
    return _filled(cx, n, v, shape)


_FILL_VALUES = {"zeros": 0.0, "ones": 1.0, "zeros_like": 0.0, "ones_like": 1.0}


@register_lowering("fill", path="fx")
def fill(cx: Converter, n: torch.fx.Node) -> Any:
    name = cx.spelled(n)
    if name == "full_like":
        return cx.b.fill(float(cx.arg(n, 1, "fill_value")), cx.out_shape(n))  # type: ignore[arg-type]
    v = float(cx.arg(n, 1, "fill_value")) if name == "full" else _FILL_VALUES[name]
    return _filled(cx, n, v, cx.out_shape(n))


@register_lowering("tensor_literal", path="fx")
def scalar_tensor(cx: Converter, n: torch.fx.Node) -> Any:
    value = cx.val(n.args[0]) if n.args else None
    dtype = n.kwargs.get("dtype")
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and dtype in (None, torch.float32)
    ):
        return cx.b.fill(float(value), ())  # a scalar from a Python number
    raise Unsupported(f"{cx.desc(n)}: only a tensor of one Python number is supported")


@register_lowering("randn", path="aten")
def randn_aten(cx: Converter, n: torch.fx.Node) -> Any:  # an initial state drawn in forward
    kwargs = {k: cx.val(v) for k, v in n.kwargs.items()}
    for k in ("layout", "pin_memory"):
        kwargs.pop(k, None)
    return factory_leaf(cx.b, cx.spelled(n), list(cx.val(n.args[0])), kwargs)


@register_lowering("randn", path="fx")
def randn(cx: Converter, n: torch.fx.Node) -> Any:  # an initial state drawn in forward (h0)
    return factory_leaf(cx.b, cx.spelled(n), cx.val(n.args), cx.val(n.kwargs))


@register_lowering("random")
def random(cx: Converter, n: torch.fx.Node) -> Any:
    raise Unsupported(f"{cx.desc(n)}: random numbers inside forward cannot be checked")


@register_lowering("rsub", path="aten")
def rsub(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.binary("sub", cx.val(n.args[1]), cx.tensor(n), n.kwargs.get("alpha", 1))


@register_lowering("elu_aten", path="aten")
def elu(cx: Converter, n: torch.fx.Node) -> Any:
    b = cx.b
    u, alpha, scale, in_scale = cx.args(
        n, ("self", None), ("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0)
    )
    if float(in_scale) != 1.0:
        raise Unsupported(f"{cx.desc(n)}: elu with input_scale is not supported")
    if float(scale) == 1.0507009873554805 and float(alpha) == 1.6732632423543772:
        return b.ew("selu", [b.plain(u)])
    y = b.ew("elu", [b.plain(u)], alpha=float(alpha))
    return y if float(scale) == 1.0 else b.ew("mul", [y, b.operand(float(scale))])
