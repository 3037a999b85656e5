"""Build the IR from already-evaluated arguments: the op families both capture paths share.

The fx converter (torch-level names) and the ATen converter (ATen overloads) each map their
spellings onto these methods with Python values (IR `Use`s for tensors, numbers, tuples), so a
normalisation, a softmax or a concatenation becomes the same IR whichever path captured it.
Normalisations, softmax and friends are decomposed into reductions plus elementwise math,
computed the way ATen does. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.attr_path import comment_text, display_path
from stitch_lsp.compiler.catalog import EW, NOT_GIVEN, EwOp
from stitch_lsp.compiler.ir import (
    Const,
    Graph,
    NodeKind,
    Operand,
    Shape,
    Unsupported,
    Use,
    broadcast_shapes,
    numel,
)

# Head sizes the flash attention kernel's register tiles hold (multiples of 16 up to this).
FLASH_MAX_HEAD = 128

_FOLD: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "maximum": max,
    "minimum": min,
}

# Scalar exponents that ATen's pow kernel computes without powf: they lower to these ops, so the
# generated kernel rounds as eager does and skips powf's log and exp.
_POW_AS: dict[float, str] = {
    2.0: "square",
    3.0: "cube",
    0.5: "sqrt",
    -0.5: "rsqrt",
    -1.0: "reciprocal",
}


def dims_of(dim: Any, rank: int) -> tuple[int, ...]:
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(rank))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted({int(d) % max(rank, 1) for d in dim}))


def keep_shape(shape: Shape, axes: tuple[int, ...]) -> Shape:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def drop_shape(shape: Shape, axes: tuple[int, ...]) -> Shape:
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def select_op(family: list[EwOp], params: dict[str, Any]) -> EwOp | None:
    """The entry of a spelling's family whose `when` matches (the most specific one)."""
    best: EwOp | None = None
    for op in family:
        ok = all(
            (params.get(k) is None) if v == NOT_GIVEN else params.get(k) == v for k, v in op.when
        )
        if ok and (best is None or len(op.when) > len(best.when)):
            best = op
    return best


@dataclass
class MinMax:
    """`torch.max(x, dim)`: the values at once; the indices (an arg-reduction) when asked."""

    values: Use
    x: Use
    dim: int
    keepdim: bool
    kind: str  # max | min


class Builder:
    def __init__(self) -> None:
        self.g = Graph()
        self.origin = ""
        self.line: int | None = None
        self.out_shape: Shape | None = None  # the current op's result shape, where known

    # -- context -------------------------------------------------------------------------------
    def at(self, origin: str, line: int | None, out_shape: Shape | None) -> None:
        # Origins end up in generated comments and docstrings: escaped once, here.
        self.origin, self.line, self.out_shape = comment_text(origin), line, out_shape

    def here(self) -> str:
        return self.origin or "?"

    def fail(self, message: str) -> Unsupported:
        return Unsupported(f"{self.here()}: {message}")

    def result_shape(self) -> Shape:
        if self.out_shape is None:
            raise self.fail("no result shape")
        return self.out_shape

    def dtype_of(self, vid: int) -> str:
        if vid in self.g.leaves:
            return self.g.leaves[vid].dtype
        node = self.g.node(vid)
        return node.dtype if node is not None else "float32"

    # -- leaves and operands -------------------------------------------------------------------
    def leaf(self, kind: str, path: str, shape: Shape, dtype: str = "float32") -> Use:
        """The parameter or buffer at dotted attribute `path` (e.g. `gemm.weight`), added once."""
        for lf in self.g.leaves.values():
            if lf.path == path:
                return Use(lf.vid, lf.shape)
        expr = display_path(path)
        if dtype != "float32" and kind == "param":
            raise Unsupported(f"{expr} is {dtype}; the builtin coder handles float32")
        created = self.g.add_leaf(kind, expr, tuple(shape), dtype, path)  # type: ignore[arg-type]
        return Use(created.vid, created.shape)

    def plain(self, u: Use, broadcast: bool = True) -> Use:
        """A use ready for elementwise math: no int64 values, `trans` spelled as strides, and an
        expand that is only a broadcast written the plain way."""
        if self.dtype_of(u.vid) == "int64":
            raise self.fail("math on an integer tensor is not generated (integers are indices)")
        if u.trans:
            u = layout.make(u, u.shape, layout.strides_of(u), 0)
        u = layout.canonical(u, self.storage(u))
        return layout.broadcast_view(u, self.storage(u)) if broadcast else u

    def storage(self, u: Use) -> int:
        """Elements stored for the value a use reads."""
        return numel(self.g.shape_of(u.vid))

    def operand(self, v: Any) -> Operand:
        if isinstance(v, Use):
            return self.plain(v)
        if isinstance(v, bool):
            return Const(1.0 if v else 0.0)
        if isinstance(v, (int, float)):
            return Const(float(v))
        raise self.fail(f"operand {v!r} is not a tensor or a number")

    def tensor(self, v: Any) -> Use:
        if not isinstance(v, Use):
            raise self.fail(f"expected a tensor, got {type(v).__name__}")
        return v

    # -- node creation -------------------------------------------------------------------------
    def add(self, kind: NodeKind, fn: str, args: list[Operand], shape: Shape, **params: Any) -> Use:
        node = self.g.add(kind, fn, args, tuple(shape), self.origin, self.line, **params)
        return Use(node.vid, node.shape)

    def ew(self, fn: str, args: list[Operand], shape: Shape | None = None, **params: Any) -> Use:
        op = EW[fn]
        if len(args) != op.arity:
            raise self.fail(f"{fn} takes {op.arity} operands, got {len(args)}")
        if shape is None:
            shapes = [a.shape for a in args if isinstance(a, Use)]
            shape = self.out_shape if self.out_shape is not None else broadcast_shapes(*shapes)
        dtype = op.result
        if dtype == "same":
            first = args[0]
            dtype = self.dtype_of(first.vid) if isinstance(first, Use) else "float32"
            if "dtype" in params:
                dtype = str(params.pop("dtype"))
        if dtype not in ("float32", "same"):
            params["dtype"] = dtype
        return self.add("ew", fn, args, shape, **params)

    def reduce(self, kind: str, field: str, x: Use, axes: tuple[int, ...], **params: Any) -> Use:
        shape = keep_shape(x.shape, axes)
        if all(x.shape[a] == 1 for a in axes):
            return self._reduce_one(kind, field, x, shape)
        return self.add("reduce", kind, [x], shape, axes=axes, field=field, **params)

    def _reduce_one(self, kind: str, field: str, x: Use, shape: Shape) -> Use:
        """A reduction over size-1 dims only (a scalar's too) reduces one element each: it is
        elementwise, and no reduction layout exists for it. Sum, mean, max, min: the element;
        softmax's max likewise and its sum of exp(x - max) is exp(x - x), 1 (NaN where x is
        infinite or NaN, as torch gives); the variance is (x - x)^2, 0 (NaN likewise); argmax
        and argmin: index 0."""
        if field == "index":
            return self.ew("identity", [Const(0.0)], shape=shape, dtype="int64")
        v = self.plain(x, broadcast=False)
        if field in ("sum", "max", "min", "mean"):
            return self.ew("identity", [v], shape=shape)
        zero = self.ew("sub", [v, v], shape=shape)
        if field == "var":
            return self.ew("square", [zero], shape=shape)
        if field == "sumexp":
            return self.ew("exp", [zero], shape=shape)
        raise self.fail(f"{kind} field {field} over size-1 dims")

    # -- elementwise ---------------------------------------------------------------------------
    def ew_op(self, op: EwOp, operands: list[Any], params: dict[str, Any]) -> Any:
        """One catalog op on evaluated operands; `params` as the spelling passed them."""
        args = [self.operand(v) for v in operands]
        if op.arity == 2 and op.name in _FOLD and all(isinstance(a, Const) for a in args):
            a0, a1 = args
            assert isinstance(a0, Const) and isinstance(a1, Const)
            return float(_FOLD[op.name](a0.value, a1.value))
        if op.result == "bool" and all(isinstance(a, Const) for a in args):
            raise self.fail("a comparison of two numbers is Python, not a tensor op")
        given = {p.name: params.get(p.name) for p in op.params}
        if op.name.startswith("clamp") and any(isinstance(v, Use) for v in given.values()):
            return self.clamp(operands[0], given.get("lo"), given.get("hi"))
        clean: dict[str, Any] = {}
        for p in op.params:
            v = given[p.name]
            if v is None:
                v = p.default
            if v is None:
                continue
            if isinstance(v, Use):
                raise self.fail(f"{op.name} with a tensor {p.name} is not supported")
            clean[p.name] = v if isinstance(v, str) else float(v)
        for p in op.params:
            if isinstance(clean.get(p.name), str):
                clean.pop(p.name)  # strings only select the entry (gelu's approximate)
        shape = None
        if not any(isinstance(a, Use) for a in args) and not op.index:
            raise self.fail(f"{op.name} of numbers only")
        if not any(isinstance(a, Use) for a in args):
            shape = self.result_shape()
        return self.ew(op.name, args, shape, **clean)

    def binary(self, fn: str, a: Any, b: Any, alpha: Any = 1) -> Any:
        x, y = self.operand(a), self.operand(b)
        if fn in ("add", "sub") and alpha not in (1, 1.0, None):
            if isinstance(y, Const):
                y = Const(y.value * float(alpha))
            else:
                y = self.ew("mul", [y, Const(float(alpha))], shape=y.shape)
        if isinstance(x, Const) and isinstance(y, Const):
            return float(_FOLD[fn](x.value, y.value))  # Python arithmetic traced as a node
        if fn == "pow" and isinstance(y, Const) and y.value in _POW_AS:
            return self.ew(_POW_AS[y.value], [x])  # the special cases of ATen's pow kernel
        return self.ew(fn, [x, y])

    def clamp(self, x: Any, lo: Any, hi: Any) -> Use:
        if isinstance(lo, Use) or isinstance(hi, Use):
            # Tensor bounds (`clamp(s, max=torch.log(torch.tensor(100.)))`): torch.clamp is
            # min(max(x, lo), hi), with broadcasting, which maximum and minimum spell exactly.
            out = x if lo is None else self.binary("maximum", x, lo)
            return out if hi is None else self.binary("minimum", out, hi)
        if lo is None and hi is None:
            raise self.fail("clamp without bounds")
        fn = (
            "clamp"
            if lo is not None and hi is not None
            else "clamp_min"
            if hi is None
            else "clamp_max"
        )
        params = {k: float(v) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
        return self.ew(fn, [self.operand(x)], None, **params)

    def where(self, cond: Any, a: Any, b: Any) -> Use:
        c = self.operand(cond)
        return self.ew("where", [c, self.operand(a), self.operand(b)])

    def masked_fill(self, x: Any, mask: Any, value: Any) -> Use:
        if isinstance(value, Use) and numel(value.shape) != 1:
            raise self.fail("masked_fill with a tensor value is not supported")
        return self.ew("where", [self.operand(mask), self.operand(value), self.operand(x)])

    def fill(self, value: float, shape: Shape) -> Use:
        """A constant tensor (zeros, ones, full): computed where it is read, never stored."""
        return self.ew("identity", [Const(float(value))], shape=tuple(shape))

    # -- reductions ----------------------------------------------------------------------------
    def sum_mean(self, x: Use, dim: Any, keepdim: bool, kind: str) -> Use:
        axes = dims_of(dim, len(x.shape))
        if not x.shape:
            r = self.ew("identity", [self.plain(x)], shape=())
            return r
        live = tuple(a for a in axes if x.shape[a] != 1)
        if not live:  # reduction over size-1 dims: a view
            shape = keep_shape(x.shape, axes) if keepdim else drop_shape(x.shape, axes)
            return self.view(x, shape)
        r = self.reduce("sum", "sum", x, axes)
        if kind == "mean":
            count = math.prod(x.shape[a] for a in axes)
            r = self.ew("mul", [r, Const(1.0 / count)], shape=r.shape)
        return r if keepdim else Use(r.vid, drop_shape(x.shape, axes))

    def minmax(self, x: Use, dim: Any, keepdim: bool, kind: str, pair: bool) -> Any:
        axes = dims_of(dim, len(x.shape))
        if all(x.shape[a] == 1 for a in axes) and x.shape:
            shape = keep_shape(x.shape, axes) if keepdim else drop_shape(x.shape, axes)
            values = self.view(x, shape)
        else:
            r = self.reduce(kind, kind, x, axes)
            values = r if keepdim else Use(r.vid, drop_shape(x.shape, axes))
        if not pair:
            return values
        return MinMax(values, x, axes[0], keepdim, kind)

    def argminmax(self, x: Use, dim: Any, keepdim: bool, kind: str) -> Use:
        if dim is None:
            x = self.view(x, (numel(x.shape),))
            dim = 0
        axes = dims_of(dim, len(x.shape))
        keep_shape(x.shape, axes)
        r = self.reduce(kind, "index", x, axes, dtype="int64")
        return r if keepdim else Use(r.vid, drop_shape(x.shape, axes))

    def indices(self, mm: MinMax) -> Use:
        return self.argminmax(mm.x, mm.dim, mm.keepdim, "argmax" if mm.kind == "max" else "argmin")

    def logsumexp(self, x: Use, dim: Any, keepdim: bool) -> Use:
        axes = dims_of(dim, len(x.shape))
        mx = self.reduce("softmax", "max", x, axes)
        se = self.reduce("softmax", "sumexp", x, axes)
        r = self.ew("lse_finish", [mx, se], shape=mx.shape)
        return r if keepdim else Use(r.vid, drop_shape(x.shape, axes))

    def softmax(self, x: Use, dim: Any, log: bool, safe: bool = False) -> Use:
        if dim is None:
            raise self.fail("softmax without dim is not supported")
        axes = dims_of(dim, len(x.shape))
        mx = self.reduce("softmax", "max", x, axes)
        se = self.reduce("softmax", "sumexp", x, axes)
        shifted = self.ew("sub", [x, mx], shape=x.shape)
        if log:
            return self.ew("sub", [shifted, self.ew("log", [se], shape=se.shape)], shape=x.shape)
        y = self.ew("div", [self.ew("exp", [shifted], shape=x.shape), se], shape=x.shape)
        if safe:  # rows that are all -inf give 0, as ATen's _safe_softmax
            dead = self.ew("eq", [mx, Const(-math.inf)], shape=mx.shape)
            y = self.ew("where", [dead, Const(0.0), y], shape=x.shape)
        return y

    # -- normalisations ------------------------------------------------------------------------
    def normalize(self, x: Use, axes: tuple[int, ...], eps: float) -> tuple[Use, Use, Use]:
        mean = self.reduce("moments", "mean", x, axes)
        var = self.reduce("moments", "var", x, axes)
        y = self.normalize_with(x, mean, var, eps)
        return y, mean, var

    def normalize_with(self, x: Use, mean: Use, var: Use, eps: float) -> Use:
        rstd = self.ew(
            "rsqrt", [self.ew("add", [var, Const(eps)], shape=var.shape)], shape=var.shape
        )
        centred = self.ew("sub", [x, mean], shape=x.shape)
        return self.ew("mul", [centred, rstd], shape=x.shape)

    def affine(self, y: Use, w: Any, b: Any, channel_shape: Shape) -> Use:
        if isinstance(w, Use):
            y = self.ew("mul", [y, self.view(w, channel_shape)], shape=y.shape)
        if isinstance(b, Use):
            y = self.ew("add", [y, self.view(b, channel_shape)], shape=y.shape)
        return y

    def layer_norm(self, x: Use, norm_shape: Shape, w: Any, b: Any, eps: float) -> Use:
        k = len(norm_shape)
        if tuple(x.shape[-k:]) != tuple(norm_shape):
            raise self.fail(f"layer_norm shape {norm_shape} does not match {x.shape}")
        axes = tuple(range(len(x.shape) - k, len(x.shape)))
        y, _, _ = self.normalize(x, axes, eps)
        return self.affine(y, w, b, tuple(norm_shape))

    def group_norm(self, x: Use, groups: int, w: Any, b: Any, eps: float) -> Use:
        x = self.contiguous(x)
        n_, c = x.shape[0], x.shape[1]
        rest = x.shape[2:]
        if c % groups:
            raise self.fail(f"{c} channels do not split into {groups} groups")
        grouped = Use(x.vid, (n_, groups, (c // groups) * math.prod(rest)))
        y, _, _ = self.normalize(grouped, (2,), eps)
        y = Use(y.vid, x.shape)
        return self.affine(y, w, b, (c,) + (1,) * len(rest))

    def batch_norm(
        self,
        x: Use,
        w: Any,
        b: Any,
        running: tuple[Use, Use, Use | None] | None,
        *,
        batch_stats: bool,
        momentum: float | None,
        eps: float,
        instance: bool,
        module: str,
    ) -> Use:
        """Batch (or instance) norm. `running` = (mean, var, num_batches_tracked) when the module
        tracks running statistics; with `batch_stats` they are updated as in training. `module`
        is the norm module's dotted attribute path (`""` for the root)."""
        x = self.contiguous(x)
        c = x.shape[1]
        rest = x.shape[2:]
        channel_shape = (c,) + (1,) * len(rest)
        if not batch_stats:
            if running is None:
                raise self.fail("batch norm without batch statistics or running statistics")
            rm, rv, _ = running
            y = self.normalize_with(
                x, self.view(rm, channel_shape), self.view(rv, channel_shape), eps
            )
            return self.affine(y, w, b, channel_shape)
        axes = tuple(range(2, len(x.shape))) if instance else (0, *range(2, len(x.shape)))
        if instance and not rest:
            raise self.fail("instance norm needs spatial dims")
        y, mean, var = self.normalize(x, axes, eps)
        if running is not None:
            if instance:
                raise self.fail("instance norm that tracks running stats")
            rm, rv, nbt = running
            if nbt is None:
                raise self.fail("batch norm without num_batches_tracked")
            count = math.prod(x.shape[a] for a in axes)
            self.add(
                "bn_update",
                "bn_update",
                [mean, var, rm, rv, nbt],
                mean.shape,
                momentum=None if momentum is None else float(momentum),
                count=count,
                module=module,
            )
        return self.affine(y, w, b, channel_shape)

    # -- pooling -------------------------------------------------------------------------------
    def pool(
        self,
        fn: str,
        x: Use,
        k: Any,
        s: Any,
        p: Any,
        d: Any,
        ceil: bool,
        out: Shape,
        include_pad: bool = True,
    ) -> Use:
        """Max or average pooling. An average whose windows do not all hold `k` counted elements
        (ceil_mode windows past the edge, padding left out of the count) gets a per-window
        divisor (`clipped`), as torch computes it; every other average divides by the window."""
        x = self.contiguous(x)
        nd = len(x.shape) - 2
        if nd < 1:
            raise self.fail("pooling needs spatial dims")

        def tup(v: Any) -> tuple[int, ...]:
            return tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),) * nd

        stride = tup(s if s not in (None, ()) else k)
        if isinstance(p, (tuple, list)) and len(p) == 1:
            p = p[0]
        if isinstance(d, (tuple, list)) and len(d) == 1:
            d = d[0]
        params: dict[str, Any] = {
            "kernel": tup(k),
            "stride": stride,
            "padding": tup(p),
            "dilation": tup(d),
        }
        if fn == "avg_pool":
            kern, pads, spatial = params["kernel"], params["padding"], x.shape[2:]
            past_edge = any(
                (o - 1) * st + kk > n + 2 * pd
                for o, st, kk, n, pd in zip(out[2:], stride, kern, spatial, pads, strict=True)
            )
            if past_edge or (not include_pad and any(pads)):
                params["clipped"] = "padded" if include_pad else "inside"
        return self.add("pool", fn, [x], out, **params)

    def adaptive_pool(self, x: Use, size: Any, kind: str) -> Use:
        """Adaptive average (or max) pooling. To 1: a reduction; to a size that divides the
        input: a plain pooling window; to the input's own size: a copy."""
        nd = len(x.shape) - 2 if len(x.shape) > 2 else len(x.shape) - 1
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * nd
        spatial = x.shape[len(x.shape) - nd :]
        sizes = [int(spatial[i] if s is None else s) for i, s in enumerate(sizes)]
        lead = x.shape[: len(x.shape) - nd]
        out = (*lead, *sizes)
        if all(s == 1 for s in sizes):
            axes = tuple(range(len(x.shape) - nd, len(x.shape)))
            if kind == "avg":
                r = self.sum_mean(x, axes, True, "mean")
            else:
                r = self.minmax(x, axes, True, "max", pair=False)
            return self.view(r, out)
        if tuple(sizes) == tuple(spatial):
            return x
        if all(i % o == 0 for i, o in zip(spatial, sizes, strict=True)) and len(x.shape) > 2:
            k = tuple(i // o for i, o in zip(spatial, sizes, strict=True))
            fn = "avg_pool" if kind == "avg" else "max_pool"
            return self.pool(fn, x, k, k, 0, 1, False, out)
        raise self.fail(
            f"adaptive pooling from {tuple(spatial)} to {tuple(sizes)} is not supported"
        )

    # -- layout (views and copies) -------------------------------------------------------------
    def contiguous(self, u: Use) -> Use:
        """A contiguous value: the use itself, or a copy that reads it through its strides."""
        u = layout.canonical(u, self.storage(u))
        if layout.is_contiguous(u):
            return u
        return self.ew("identity", [self.plain(u, broadcast=False)], shape=u.shape)

    def copy(self, u: Use) -> Use:
        return self.ew("identity", [self.plain(u, broadcast=False)], shape=u.shape)

    def view(self, u: Use, shape: Any) -> Use:
        shape = self.infer_shape(u, shape)
        u = layout.canonical(u, self.storage(u))
        v = layout.view(u, shape)
        if v is None:
            v = layout.view(self.contiguous(u), shape)
            assert v is not None
        return v

    def infer_shape(self, u: Use, shape: Any) -> Shape:
        dims = [int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,))]
        if dims.count(-1) > 1:
            raise self.fail(f"view {dims} has two -1 dims")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            dims[dims.index(-1)] = numel(u.shape) // known if known else 0
        return tuple(dims)

    def flatten(self, u: Use, start: int = 0, end: int = -1) -> Use:
        rank = len(u.shape)
        if rank == 0:
            return self.view(u, (1,))
        start, end = start % rank, end % rank
        shape = (*u.shape[:start], math.prod(u.shape[start : end + 1]), *u.shape[end + 1 :])
        return self.view(u, shape)

    def permute(self, u: Use, dims: Any) -> Use:
        return layout.permute(u, tuple(int(d) for d in dims))

    def transpose(self, u: Use, d0: int, d1: int) -> Use:
        return layout.transpose(u, int(d0), int(d1))

    def mT(self, u: Use) -> Use:
        """The last two dims swapped, as the older GEMM-operand flag when that is enough."""
        if len(u.shape) < 2:
            raise self.fail("transpose of a non-matrix")
        u = layout.canonical(u, self.storage(u))
        if layout.is_contiguous(u) or (u.trans and not u.strided):
            s = u.shape
            return Use(u.vid, (*s[:-2], s[-1], s[-2]), not u.trans)
        return layout.transpose(u, -1, -2)

    def split(self, u: Use, size_or_sizes: Any, dim: int) -> list[Use]:
        dim %= len(u.shape)
        total = u.shape[dim]
        if isinstance(size_or_sizes, (tuple, list)):
            sizes = [int(s) for s in size_or_sizes]
        else:
            step = int(size_or_sizes)
            sizes = [min(step, total - i) for i in range(0, total, step)] if step else []
        out, start = [], 0
        for s in sizes:
            out.append(layout.slice_(u, dim, start, start + s))
            start += s
        return out

    def roll(self, u: Any, shifts: Any, dims: Any) -> Use:
        """torch.roll along named dims as two slices joined by a cat per dim (Swin's cyclic
        window shift). Without dims torch rolls the flattened tensor; that is refused."""
        x = start = self.tensor(u)
        if dims is None or dims == ():
            raise self.fail("roll without dims (over the flattened tensor) is not supported")
        sh = [int(s) for s in shifts] if isinstance(shifts, (tuple, list)) else [int(shifts)]
        ds = [int(d) for d in dims] if isinstance(dims, (tuple, list)) else [int(dims)]
        if len(sh) != len(ds):
            raise self.fail("roll needs one shift per dim")
        for shift, d in zip(sh, ds, strict=True):
            d %= len(x.shape)
            size = x.shape[d]
            k = shift % size if size else 0
            if k:
                x = self.cat(
                    [layout.slice_(x, d, size - k, size), layout.slice_(x, d, 0, size - k)], d
                )
        return x if x is not start else self.copy(x)

    def chunk(self, u: Use, chunks: int, dim: int) -> list[Use]:
        size = u.shape[dim % len(u.shape)]
        step = -(-size // int(chunks))
        return self.split(u, step, dim)

    def index(self, u: Use, idx: Any) -> Use:
        """`x[...]` with ints, slices, None and Ellipsis (tensor indices are refused)."""
        items = list(idx) if isinstance(idx, tuple) else [idx]
        if (
            len(items) == 1
            and isinstance(items[0], Use)
            and len(u.shape) == 2
            and self.dtype_of(items[0].vid) == "int64"
        ):
            return self.embedding(u, items[0])  # table[index]: rows picked by an int64 tensor
        if any(isinstance(i, Use) for i in items):
            raise self.fail("indexing with a tensor is not supported")
        if Ellipsis in items:
            at = items.index(Ellipsis)
            used = sum(1 for i in items if i is not None and i is not Ellipsis)
            items[at : at + 1] = [slice(None)] * (len(u.shape) - used)
        dim = 0
        for it in items:
            if it is None:
                u = layout.unsqueeze(u, dim)
                dim += 1
            elif isinstance(it, slice):
                if it != slice(None):
                    u = layout.slice_(u, dim, it.start, it.stop, it.step or 1)
                dim += 1
            elif isinstance(it, int) and not isinstance(it, bool):
                u = layout.select(u, dim, it)
            else:
                raise self.fail(f"index {it!r} is not supported")
        return u

    def repeat(self, x: Use, reps: tuple[int, ...]) -> Use:
        """`x.repeat(*reps)`: a broadcast of x, copied out."""
        u = x
        for _ in range(len(reps) - len(x.shape)):
            u = layout.unsqueeze(u, 0)
        v = u
        for i in range(len(u.shape)):
            v = layout.unsqueeze(v, 2 * i)
        inter = tuple(e for d, r in zip(u.shape, reps, strict=True) for e in (r, d))
        shape = tuple(d * r for d, r in zip(u.shape, reps, strict=True))
        return self.view(self.contiguous(layout.expand(v, inter)), shape)

    def cat(self, tensors: list[Any], dim: int) -> Use:
        uses = [self.tensor(t) for t in tensors]
        uses = [u for u in uses if not (len(u.shape) == 1 and u.shape[0] == 0)]
        if not uses:
            raise self.fail("cat of nothing")
        rank = len(uses[0].shape)
        dim %= rank
        if len(uses) == 1:
            return uses[0]
        for u in uses:
            if self.dtype_of(u.vid) == "int64":
                raise self.fail("cat of integer tensors is not supported")
        sizes = tuple(int(u.shape[dim]) for u in uses)
        shape = (*uses[0].shape[:dim], sum(sizes), *uses[0].shape[dim + 1 :])
        args: list[Operand] = [self.plain(u, broadcast=False) for u in uses]
        return self.add("gather", "cat", args, shape, dim=dim, sizes=sizes)

    def stack(self, tensors: list[Any], dim: int) -> Use:
        uses = [self.tensor(t) for t in tensors]
        rank = len(uses[0].shape) + 1
        return self.cat([layout.unsqueeze(u, dim % rank) for u in uses], dim % rank)

    def pad(self, x: Use, pads: Any, value: float) -> Use:
        pads = [int(p) for p in pads]
        if len(pads) % 2 or len(pads) // 2 > len(x.shape):
            raise self.fail(f"padding {pads} does not fit a rank-{len(x.shape)} tensor")
        rank = len(x.shape)
        before = [0] * rank
        after = [0] * rank
        for i in range(len(pads) // 2):
            before[rank - 1 - i] = pads[2 * i]
            after[rank - 1 - i] = pads[2 * i + 1]
        shape = tuple(d + b + a for d, b, a in zip(x.shape, before, after, strict=True))
        if all(p == 0 for p in pads):
            return x
        return self.add(
            "gather",
            "pad",
            [self.plain(x, broadcast=False)],
            shape,
            before=tuple(before),
            value=float(value),
        )

    def embedding(self, weight: Any, idx: Any) -> Use:
        """Rows of `weight` picked by an integer tensor (an input or a buffer)."""
        w, i = self.tensor(weight), self.tensor(idx)
        if self.dtype_of(i.vid) != "int64":
            raise self.fail("embedding indices must be an int64 tensor")
        if i.vid not in self.g.leaves:
            raise self.fail("embedding indices computed inside forward are not supported")
        if len(w.shape) != 2:
            raise self.fail("embedding weight must be 2-D")
        return self.add("gather", "embedding", [w, i], (*i.shape, w.shape[1]))

    def cumsum(self, x: Use, dim: int) -> Use:
        if not x.shape:
            return self.copy(x)
        axis = dim % len(x.shape)
        if x.shape[axis] == 1:
            return self.copy(x)
        return self.add("scan", "cumsum", [self.plain(x, broadcast=False)], x.shape, axis=axis)

    # -- GEMM ----------------------------------------------------------------------------------
    def gemm(self, a: Use, b: Use, shape: Shape, batch: int) -> Use:
        """A bf16/fp16 product is stored in its operands' type, as torch.mm's result is (the
        tensor cores accumulate in fp32 either way)."""
        params: dict[str, Any] = {"batch": batch}
        dtype = self.dtype_of(a.vid)
        if dtype in ("bfloat16", "float16") and self.dtype_of(b.vid) == dtype:
            params["dtype"] = dtype
        return self.add("gemm", "gemm", [a, b], shape, **params)

    def _operand_3d(self, u: Use, batch_shape: Shape) -> tuple[Use, int]:
        """u broadcast to (*batch_shape, r, c) as one batch dim a strided batched GEMM can walk:
        (use of shape (batch, r, c) or (r, c), batch). Copies when strides cannot express it."""
        u = layout.canonical(u, self.storage(u))
        r, c = u.shape[-2], u.shape[-1]
        batch = math.prod(batch_shape)
        full = layout.expand(u, (*batch_shape, r, c)) if batch_shape else u
        lead = len(full.shape) - 2
        st = layout.strides_of(full)
        bst = [s for d, s in zip(full.shape[:lead], st[:lead], strict=True) if d != 1]
        bsz = [d for d in full.shape[:lead] if d != 1]
        uniform = all(bst[i] == bst[i + 1] * bsz[i + 1] for i in range(len(bst) - 1))
        if bst and all(s == 0 for s in bst) and not full.trans:  # one matrix for every batch
            cand = Use(full.vid, (batch, r, c), strides=(0, st[-2], st[-1]), offset=full.offset)
            if self._gemm_ok(cand):
                return cand, batch
        if uniform:
            inner = bst[-1] if bst else r * c
            if full.trans and not full.strided:
                cand = Use(full.vid, (batch, r, c), trans=True)
            else:
                cand = layout.make(full, (batch, r, c), (inner, st[-2], st[-1]), full.offset)
            if self._gemm_ok(cand):
                return cand, batch
        copied = self.contiguous(full)
        return Use(copied.vid, (batch, r, c)), batch

    @staticmethod
    def _gemm_ok(u: Use) -> bool:
        """cuBLAS reads a matrix with unit stride along rows or columns, one batch stride."""
        if u.trans and not u.strided:
            return True
        st = layout.strides_of(u)
        r, c = u.shape[-2], u.shape[-1]
        return (st[-1] == 1 or c == 1) or (st[-2] == 1 or r == 1)

    def matmul(self, a: Any, b: Any) -> Use:
        if not isinstance(a, Use) or not isinstance(b, Use):
            raise self.fail("matmul operands must be tensors")
        kinds = {self.dtype_of(u.vid) for u in (a, b)}
        if len(kinds) != 1 or not kinds <= {"float32", "bfloat16", "float16"}:
            raise self.fail(f"matmul of {' and '.join(sorted(kinds))} tensors is not supported")
        squeeze_a = squeeze_b = False
        if len(a.shape) == 1:
            a, squeeze_a = layout.unsqueeze(a, 0), True
        if len(b.shape) == 1:
            b, squeeze_b = layout.unsqueeze(b, 1), True
        m, k = a.shape[-2], a.shape[-1]
        k2, n = b.shape[-2], b.shape[-1]
        if k != k2:
            raise self.fail(f"matmul of {a.shape} and {b.shape}")
        if len(b.shape) == 2 and (len(a.shape) == 2 or not a.trans):
            # (..., m, k) @ (k, n): one GEMM over all leading rows
            rows = math.prod(a.shape[:-1])
            a2 = self.view(a, (rows, k)) if len(a.shape) > 2 else a
            a2 = self._matrix(a2)
            r = self.gemm(a2, self._matrix(b), (rows, n), 1)
            out = (*a.shape[:-1], n)
        else:
            batch_shape = broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a3, batch = self._operand_3d(a, batch_shape)
            b3, _ = self._operand_3d(b, batch_shape)
            if batch == 1:
                a3 = self._matrix(self._squeeze_batch(a3))
                b3 = self._matrix(self._squeeze_batch(b3))
                r = self.gemm(a3, b3, (m, n), 1)
            else:
                r = self.gemm(a3, b3, (batch, m, n), batch)
            out = (*batch_shape, m, n)
        y = Use(r.vid, out)
        if squeeze_a:
            y = self.view(y, (*out[:-2], out[-1]))
        if squeeze_b:
            y = self.view(y, y.shape[:-1])
        return y

    def _squeeze_batch(self, u: Use) -> Use:
        if len(u.shape) == 3 and u.shape[0] == 1:
            if u.trans and not u.strided:
                return Use(u.vid, u.shape[1:], trans=True)
            st = layout.strides_of(u)
            return layout.make(u, u.shape[1:], st[1:], u.offset)
        return u

    def _matrix(self, u: Use) -> Use:
        """A 2-D GEMM operand: plain, `trans`, or strided with unit stride on one side."""
        g = layout.gemm_operand(u, self.storage(u))
        if g is not None:
            return g
        return u if self._gemm_ok(u) else self.contiguous(u)

    def linear(self, x: Use, w: Any, b: Any) -> Use:
        if not isinstance(w, Use) or len(w.shape) != 2:
            raise self.fail("linear weight must be a 2-D tensor")
        out_shape = (*x.shape[:-1], w.shape[0])
        m = math.prod(x.shape[:-1])
        x2 = self._matrix(self.view(x, (m, x.shape[-1])))
        r = self.gemm(x2, self._matrix(self.mT(w)), (m, w.shape[0]), 1)
        y = Use(r.vid, out_shape)
        if isinstance(b, Use):
            y = self.ew("add", [y, b], shape=out_shape)
        return y

    def addmm(self, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Use:
        if beta != 1 or alpha != 1:
            raise self.fail("addmm with alpha/beta is not supported")
        out = self.matmul(a, b)
        return self.ew("add", [out, self.operand(bias)], shape=out.shape)

    def conv(
        self,
        x: Use,
        w: Use,
        b: Any,
        *,
        stride: Any,
        padding: Any,
        dilation: Any,
        groups: int,
        transposed: bool,
        output_padding: Any,
        out: Shape,
    ) -> Use:
        x, w = self.contiguous(x), self.contiguous(w)
        dims = len(x.shape) - 2
        fn = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"

        def tup(v: Any) -> tuple[int, ...]:
            if isinstance(v, (tuple, list)):
                return tuple(int(e) for e in v) if len(v) != 1 else (int(v[0]),) * dims
            return (int(v),) * dims

        params: dict[str, Any] = {
            "stride": tup(stride),
            "padding": padding if isinstance(padding, str) else tup(padding),
            "dilation": tup(dilation),
            "groups": int(groups),
        }
        if transposed:
            params["output_padding"] = tup(output_padding)
        stored = self.dtype_of(x.vid)
        if stored in ("bfloat16", "float16"):  # cuDNN returns the input's type
            params["dtype"] = stored
        y = self.add("conv", fn, [x, w], out, **params)
        if isinstance(b, Use):
            y = self.ew("add", [y, self.view(b, (out[1],) + (1,) * dims)], shape=out)
        return y

    # -- attention -----------------------------------------------------------------------------
    def attention(
        self,
        q: Use,
        k: Use,
        v: Use,
        mask: Any,
        causal: bool,
        scale: Any,
        dropout: float,
        gqa: bool = False,
    ) -> Use:
        """scaled_dot_product_attention: one flash-style kernel in bf16/fp16 (online softmax on
        tensor cores, `attn` node), else softmax(q k^T * scale + mask) v on cuBLAS GEMMs."""
        if dropout:
            raise self.fail("attention dropout is random")
        if isinstance(mask, Use) and self.dtype_of(mask.vid) == "int64":
            raise self.fail("an integer attention mask is not supported")
        if mask is not None and not isinstance(mask, Use):
            raise self.fail(f"attention mask {mask!r} is not a tensor")
        heads = q.shape[-3] if len(q.shape) >= 3 else 1
        kv_heads = k.shape[-3] if len(k.shape) >= 3 else 1
        # One key/value head broadcasts over the query heads as a batch dim (Falcon's
        # multi-query attention calls sdpa so, without enable_gqa): grouped-query with one group.
        grouped = gqa or kv_heads == 1
        if heads != kv_heads and not (grouped and kv_heads and heads % kv_heads == 0):
            raise self.fail(f"attention over {heads} query heads and {kv_heads} key heads")
        flash = self._flash_attention(q, k, v, mask, causal, scale)
        if flash is not None:
            return flash
        if heads != kv_heads:
            k, v = self._repeat_heads(k, heads), self._repeat_heads(v, heads)
        e = q.shape[-1]
        s = self.matmul(q, self.mT(k))
        sc = float(scale) if scale is not None else 1.0 / math.sqrt(e)
        s = self.ew("mul", [s, Const(sc)], shape=s.shape)
        lq, lk = s.shape[-2], s.shape[-1]
        if causal:
            keep = self.ew("tril", [Const(1.0)], shape=(lq, lk), diagonal=0.0)
            s = self.ew("where", [keep, s, Const(-math.inf)], shape=s.shape)
        if isinstance(mask, Use):
            if self.dtype_of(mask.vid) == "bool":
                s = self.ew("where", [self.plain(mask), s, Const(-math.inf)], shape=s.shape)
            else:
                s = self.ew("add", [s, self.plain(mask)], shape=s.shape)
        p = self.softmax(s, -1, log=False, safe=True)
        if self.dtype_of(p.vid) != self.dtype_of(v.vid):  # bf16/fp16: P rounded, as eager's
            p = self.ew("identity", [p], shape=p.shape, dtype=self.dtype_of(v.vid))
        return self.matmul(p, v)

    def _repeat_heads(self, u: Use, heads: int) -> Use:
        """enable_gqa's key/value heads repeated (head h reads kv head h // group)."""
        kv = u.shape[-3]
        wide = layout.expand(
            layout.unsqueeze(u, -3), (*u.shape[:-3], kv, heads // kv, *u.shape[-2:])
        )
        return self.view(self.contiguous(wide), (*u.shape[:-3], heads, *u.shape[-2:]))

    def _flash_operand(self, u: Use) -> Use:
        """A 4-D operand whose rows are contiguous: what the flash kernel reads by strides."""
        u = self.plain(u, broadcast=False)
        while len(u.shape) < 4:
            u = layout.unsqueeze(u, 0)
        st = layout.strides_of(u)
        if st[-1] != 1 or any(x < 0 for x in st):
            u = self.contiguous(u)
        return u

    def _through_copy(self, u: Use) -> Use:
        """An operand read from a `.contiguous()` copy (nn.MultiheadAttention splits its packed
        projection that way) is read from what was copied, by strides, where its rows stay
        contiguous: the flash kernel takes strides, and the copy, read by nothing else, goes."""
        node = self.g.node(u.vid)
        if node is None or node.kind != "ew" or node.fn != "identity" or len(node.args) != 1:
            return u
        src = node.args[0]
        if not isinstance(src, Use) or src.trans or self.dtype_of(src.vid) != node.dtype:
            return u
        got = layout.compose(u, src, math.prod(self.g.shape_of(src.vid)))
        if got is None or layout.strides_of(got)[-1] != 1:
            return u
        return got

    def _unrepeated(self, u: Use) -> Use | None:
        """The key/value heads a `repeat_kv` copy (expand over a new head dim, then reshape)
        was made from, as a 4-D view the flash kernel reads by GQA; None for anything else."""
        if u.strided or u.trans or len(u.shape) != 4:
            return None
        node = self.g.node(u.vid)
        if node is None or node.kind != "ew" or node.fn != "identity" or len(node.args) != 1:
            return None
        src = node.args[0]
        if not isinstance(src, Use) or len(src.shape) != 5 or src.trans:
            return None
        if self.dtype_of(src.vid) != node.dtype:
            return None  # a cast, not a copy
        st = layout.strides_of(src)
        b, hk, rep, length, d = src.shape
        if st[2] != 0 or (b, hk * rep, length, d) != u.shape:
            return None
        return Use(
            src.vid, (b, hk, length, d), strides=(st[0], st[1], st[3], st[4]), offset=src.offset
        )

    def _flash_attention(
        self, q: Use, k: Use, v: Use, mask: Use | None, causal: bool, scale: Any
    ) -> Use | None:
        """The `attn` node where the flash kernel applies; None where it does not (float32,
        head sizes off its tiles, batch dims that broadcast), and the math form is built."""
        dtypes = {self.dtype_of(u.vid) for u in (q, k, v)}
        if len(dtypes) != 1 or not dtypes <= {"bfloat16", "float16"}:
            return None
        rank = len(q.shape)
        if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
            return None
        e, ev = q.shape[-1], v.shape[-1]
        if k.shape[-1] != e or v.shape[-2] != k.shape[-2]:
            return None
        if e % 16 or ev % 16 or e > FLASH_MAX_HEAD or ev > FLASH_MAX_HEAD:
            return None
        if q.shape[:-3] != k.shape[:-3] or k.shape[:-2] != v.shape[:-2]:
            return None
        q, k, v = (self._through_copy(u) for u in (q, k, v))
        k_src, v_src = self._unrepeated(k), self._unrepeated(v)
        if k_src is not None and v_src is not None and k_src.shape[1] == v_src.shape[1]:
            k, v = k_src, v_src  # repeat_kv's copies are left unread (and pruned)
        q4, k4, v4 = (self._flash_operand(u) for u in (q, k, v))
        b, h, lq, _ = q4.shape
        lk = k4.shape[-2]
        if b > 65535 or h > 65535:
            return None  # the kernel's grid takes heads and batch as its y and z
        args: list[Operand] = [q4, k4, v4]
        kind = ""
        if mask is not None:
            try:
                shape = broadcast_shapes(mask.shape, (b, h, lq, lk))
            except Unsupported:
                return None
            if shape != (b, h, lq, lk):
                return None
            args.append(layout.expand(self.plain(mask, broadcast=False), (b, h, lq, lk)))
            kind = "bool" if self.dtype_of(mask.vid) == "bool" else "add"
        sc = float(scale) if scale is not None else 1.0 / math.sqrt(e)
        # Stored as (batch, query, head, value): the layout the next projection reads after
        # `transpose(1, 2).reshape(b, l, -1)`, so that transpose is a free view.
        stored = self.add(
            "attn", "flash", args, (b, lq, h, ev),
            causal=bool(causal), scale=sc, mask=kind, dtype=dtypes.pop(),
        )  # fmt: skip
        out = layout.permute(stored, (0, 2, 1, 3))
        return out if rank == 4 else self.view(out, (h, lq, ev))
