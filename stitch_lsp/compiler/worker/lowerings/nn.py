"""Normalisation, pooling and dropout."""

from __future__ import annotations

from typing import Any

import torch.fx

from stitch_lsp.compiler.ir import Graph, Unsupported, Use
from stitch_lsp.compiler.rewrites.pointwise import value_range
from stitch_lsp.compiler.worker.converter import Converter
from stitch_lsp.compiler.worker.lowering import register_lowering

# -- normalisation --------------------------------------------------------------------------------


@register_lowering("layer_norm", path="aten")
def layer_norm_aten(cx: Converter, n: torch.fx.Node) -> Any:
    u, shape, w, bias, eps = cx.args(
        n,
        ("input", None),
        ("normalized_shape", None),
        ("weight", None),
        ("bias", None),
        ("eps", 1e-5),
    )
    return (cx.b.layer_norm(u, tuple(shape), w, bias, float(eps)), None, None)


@register_lowering("layer_norm", path="fx")
def layer_norm(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.layer_norm(
        cx.tensor(n),
        tuple(cx.arg(n, 1, "normalized_shape")),
        cx.arg(n, 2, "weight"),
        cx.arg(n, 3, "bias"),
        float(cx.arg(n, 4, "eps", 1e-5)),
    )


@register_lowering("group_norm", path="aten")
def group_norm_aten(cx: Converter, n: torch.fx.Node) -> Any:
    u, w, bias, _n, _c, _hw, group, eps = cx.args(
        n,
        ("input", None),
        ("weight", None),
        ("bias", None),
        ("N", 0),
        ("C", 0),
        ("HxW", 0),
        ("group", 1),
        ("eps", 1e-5),
    )
    return (cx.b.group_norm(u, int(group), w, bias, float(eps)), None, None)


@register_lowering("group_norm", path="fx")
def group_norm(cx: Converter, n: torch.fx.Node) -> Any:
    groups, w, bias = int(cx.arg(n, 1, "num_groups")), cx.arg(n, 2, "weight"), cx.arg(n, 3, "bias")
    return cx.b.group_norm(cx.tensor(n), groups, w, bias, float(cx.arg(n, 4, "eps", 1e-5)))


@register_lowering("batch_norm", path="fx")
def batch_norm_function(cx: Converter, n: torch.fx.Node) -> Any:
    """F.batch_norm, as library norm layers call it (timm's BatchNormAct2d)."""
    u, rm, rv, w, bias, training, momentum, eps = cx.args(
        n,
        ("input", None),
        ("running_mean", None),
        ("running_var", None),
        ("weight", None),
        ("bias", None),
        ("training", False),
        ("momentum", 0.1),
        ("eps", 1e-5),
    )
    return _batch_norm(cx, n, u, w, bias, rm, rv, training, momentum, eps)


@register_lowering("batch_norm", path="aten")
def batch_norm(cx: Converter, n: torch.fx.Node) -> Any:
    """The three ATen spellings of batch norm; running statistics must be a module's buffers."""
    name = cx.spelled(n)
    common = (("input", None), ("weight", None), ("bias", None))
    stats = (("running_mean", None), ("running_var", None))
    tail = (("momentum", 0.1), ("eps", 1e-5))
    if name == "_native_batch_norm_legit_no_training":
        u, w, bias, rm, rv, momentum, eps = cx.args(n, *common, *stats, *tail)
        training = False
    elif getattr(n.target, "_overloadname", "default") == "no_stats":
        u, w, bias, training, momentum, eps = cx.args(n, *common, ("training", True), *tail)
        rm = rv = None
    else:
        u, w, bias, rm, rv, training, momentum, eps = cx.args(
            n, *common, *stats, ("training", True), *tail
        )
    return (_batch_norm(cx, n, u, w, bias, rm, rv, training, momentum, eps), None, None)


def _batch_norm(
    cx: Converter,
    n: torch.fx.Node,
    u: Any,
    w: Any,
    bias: Any,
    rm: Any,
    rv: Any,
    training: Any,
    momentum: Any,
    eps: Any,
) -> Use:
    running = None
    module = ""
    if isinstance(rm, Use) and isinstance(rv, Use):
        rm_leaf = cx.g.leaves.get(rm.vid)
        rm_path = (rm_leaf.path if rm_leaf is not None else None) or ""
        owner, _, last = rm_path.rpartition(".")
        if last != "running_mean":
            raise Unsupported(f"{cx.desc(n)}: running statistics that are not a module's")
        module = owner
        nbt = None
        if training:
            counter = f"{owner}.num_batches_tracked" if owner else "num_batches_tracked"
            nbt = cx.state_leaf(n, counter)
        running = (rm, rv, nbt)
    return cx.b.batch_norm(
        u,
        w,
        bias,
        running,
        batch_stats=bool(training),
        momentum=None if momentum is None else float(momentum),
        eps=float(eps),
        instance=False,
        module=module,
    )


@register_lowering("normalize", path="fx")
def normalize(cx: Converter, n: torch.fx.Node) -> Any:
    b, x = cx.b, cx.tensor(n)
    p, dim, eps = cx.arg(n, 1, "p", 2.0), cx.arg(n, 2, "dim", 1), cx.arg(n, 3, "eps", 1e-12)
    if float(p) != 2.0:
        raise Unsupported(f"{cx.desc(n)}: normalize with p={p} is not supported")
    sq = b.ew("square", [b.plain(x)], shape=x.shape)
    total = b.sum_mean(sq, dim, True, "sum")
    norm = b.ew("sqrt", [total], shape=total.shape)
    norm = b.ew("clamp_min", [norm], shape=total.shape, lo=float(eps))
    return b.ew("div", [b.plain(x), norm], shape=x.shape)


# -- pooling --------------------------------------------------------------------------------------


@register_lowering("max_pool", path="aten")
def max_pool_aten(cx: Converter, n: torch.fx.Node) -> Any:
    u, k, s, p, d, ceil = cx.args(
        n,
        ("self", None),
        ("kernel_size", None),
        ("stride", ()),
        ("padding", 0),
        ("dilation", 1),
        ("ceil_mode", False),
    )
    out = cx.out_shape(n) or tuple(n.meta["val"][0].shape)
    y = cx.b.pool("max_pool", u, k, s, p, d, bool(ceil), out)
    return (y, None) if "indices" in cx.spelled(n) else y


@register_lowering("max_pool", path="fx")
def max_pool(cx: Converter, n: torch.fx.Node) -> Any:
    if cx.arg(n, 6, "return_indices", False):
        raise Unsupported(f"{cx.desc(n)}: max pooling with indices is not supported")
    return cx.b.pool(
        "max_pool",
        cx.tensor(n),
        cx.arg(n, 1, "kernel_size"),
        cx.arg(n, 2, "stride"),
        cx.arg(n, 3, "padding", 0),
        cx.arg(n, 4, "dilation", 1),
        bool(cx.arg(n, 5, "ceil_mode", False)),
        cx.out_shape(n),  # type: ignore[arg-type]
    )


@register_lowering("avg_pool")
def avg_pool(cx: Converter, n: torch.fx.Node) -> Any:
    """ATen's avg_pool and F.avg_pool take the same arguments in the same places."""
    _, k, s, p, ceil, cip, div = cx.args(
        n,
        ("input", None),
        ("kernel_size", None),
        ("stride", None),  # None and () both mean the kernel size
        ("padding", 0),
        ("ceil_mode", False),
        ("count_include_pad", True),
        ("divisor_override", None),
    )
    if div:
        raise Unsupported(f"{cx.desc(n)}: average pooling with divisor_override")
    out = cx.out_shape(n)
    return cx.b.pool(
        "avg_pool",
        cx.tensor(n),
        k,
        s,
        p,
        1,
        bool(ceil),
        out,  # type: ignore[arg-type]
        include_pad=bool(cip),
    )


@register_lowering("adaptive_avg_pool")
def adaptive_avg_pool(cx: Converter, n: torch.fx.Node) -> Any:
    return cx.b.adaptive_pool(cx.tensor(n), cx.arg(n, 1, "output_size"), "avg")


@register_lowering("adaptive_max_pool", path="aten")
def adaptive_max_pool_aten(cx: Converter, n: torch.fx.Node) -> Any:
    return (cx.b.adaptive_pool(cx.tensor(n), cx.val(n.args[1]), "max"), None)


@register_lowering("adaptive_max_pool", path="fx")
def adaptive_max_pool(cx: Converter, n: torch.fx.Node) -> Any:
    if cx.arg(n, 2, "return_indices", False):
        raise Unsupported(f"{cx.desc(n)}: max pooling with indices is not supported")
    return cx.b.adaptive_pool(cx.tensor(n), cx.arg(n, 1, "output_size"), "max")


# -- dropout (identity in eval mode) ------------------------------------------------------------


@register_lowering("stochastic_depth", path="fx")
def stochastic_depth(cx: Converter, n: torch.fx.Node) -> Any:
    """torchvision's drop-path (EfficientNet, ConvNeXt, Swin): the identity in eval mode."""
    p, training = cx.arg(n, 1, "p", 0.0), cx.arg(n, 3, "training", True)
    if training and float(p) > 0:
        raise Unsupported(f"{cx.desc(n)}: stochastic depth in training mode is random")
    return cx.tensor(n)


def nothing_to_drop(graph: Graph, u: Any, name: str) -> bool:
    """The input is 0 wherever it is a number (min(x, 0) clamped to [0, 1]: held-out level 2's
    83_Conv3d_GroupNorm_Min_Clamp_Dropout), and NaN stays NaN whether dropped or scaled: a
    training-mode dropout of it returns it whatever the draw. Not an alpha dropout, which
    moves what it drops to a negative value and shifts the rest."""
    if "alpha" in name or not isinstance(u, Use):
        return False
    r = value_range(graph, u)
    return r is not None and r.lo == r.hi == 0.0 and r.exact_lo and r.exact_hi


@register_lowering("dropout", path="aten")
def dropout_aten(cx: Converter, n: torch.fx.Node) -> Any:
    u, p, train = cx.args(n, ("input", None), ("p", 0.5), ("train", True))
    if train is not False and float(p) > 0 and not nothing_to_drop(cx.b.g, u, cx.spelled(n)):
        raise Unsupported(f"{cx.desc(n)}: dropout in training mode is random")
    return (u, None) if cx.spelled(n) == "native_dropout" else u


@register_lowering("dropout", path="fx")
def dropout(cx: Converter, n: torch.fx.Node) -> Any:
    training = cx.arg(n, 2, "training", True) and float(cx.arg(n, 1, "p", 0.5)) > 0
    if training and not nothing_to_drop(cx.b.g, cx.tensor(n), cx.spelled(n)):
        raise Unsupported(f"{cx.desc(n)}: dropout in training mode is random")
    return cx.tensor(n)
