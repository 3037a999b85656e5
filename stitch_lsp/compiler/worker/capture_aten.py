"""The ATen path: capture where symbolic fx tracing cannot (einops, data-shaped Python, modules
whose forward branches on tensor properties such as nn.MultiheadAttention).

The model's forward runs for real under `make_fx` on fake tensors backed by the meta device (no
real memory, however large the problem), with parameters, buffers and plain tensor attributes
passed in by name, so every placeholder maps back to `self.<path>`. Composite ops arrive
decomposed (einsum into permutes and bmm, scaled_dot_product_attention into its math form);
each ATen overload maps onto the same IR builder as the fx path, through the same op catalog.
Stack traces keep the reference's line numbers for refusals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import Builder, MinMax, select_op
from stitch_lsp.compiler.catalog import EwOp
from stitch_lsp.compiler.ir import Graph, Shape, Unsupported, Use
from stitch_lsp.compiler.recurrent import index_result
from stitch_lsp.compiler.worker.capture_fx import line_in
from stitch_lsp.compiler.worker.capture_leaves import (
    LEAF_OP,
    LeafCall,
    LeafRecord,
    leaves_as_ops,
    plain_attributes,
    run_leaf,
)
from stitch_lsp.compiler.worker.recurrent_capture import factory_leaf
from stitch_lsp.compiler.worker.spelling import leaf_rule, tables

_aten = torch.ops.aten


def trace(
    model: nn.Module, inputs: list[Any]
) -> tuple[torch.fx.GraphModule, list[str], set[str], list[LeafRecord]]:
    """(graph, placeholder names of the state, names of plain attributes, leaf-module calls)."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    plain = plain_attributes(model)
    state = {**params, **buffers, **plain}
    names = list(state)

    def forward(flat: list[torch.Tensor], *args: Any) -> Any:
        return functional_call(model, dict(zip(names, flat, strict=True)), args, strict=False)

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        flat = [mode.from_tensor(t) for t in state.values()]
        fake_inputs = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in inputs]
    with leaves_as_ops(model) as records:
        gm = make_fx(forward, tracing_mode="real", record_stack_traces=True)(flat, *fake_inputs)
        kept = list(records)
    return gm, names, set(plain), kept


class _Missing:
    """A result the converter does not compute (a norm's saved mean): an error only if read."""

    def __init__(self, where: str) -> None:
        self.where = where


def _shape(node: torch.fx.Node) -> Shape | None:
    v = node.meta.get("val")
    if isinstance(v, torch.Tensor):
        return tuple(int(d) for d in v.shape)
    return None


def _name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


class AtenConverter:
    def __init__(
        self,
        gm: torch.fx.GraphModule,
        state_names: list[str],
        plain: set[str],
        records: list[LeafRecord],
        model: nn.Module,
        inputs: list[Any],
        input_names: list[str],
        path: str | None,
    ) -> None:
        self.gm = gm
        self.state_names = state_names
        self.plain = plain
        self.records = records
        self.model = model
        self.inputs = inputs
        self.input_names = input_names
        self.path = path
        self.b = Builder()
        self.env: dict[torch.fx.Node, Any] = {}
        self.placeholders = 0
        self.attr_values: dict[str, Any] = {}
        _, _, _, self.overloads = tables()
        self.handlers = self._handlers()

    @property
    def g(self) -> Graph:
        return self.b.g

    def run(self) -> Graph:
        for node in self.gm.graph.nodes:
            self.node = node
            self.b.at(self.desc(node), self.line(node), _shape(node))
            if node.op == "output":
                self.output(node.args[0])
                continue
            self.env[node] = self.convert(node)
        self.g.prune()
        return self.g

    def line(self, node: torch.fx.Node) -> int | None:
        return line_in(node.meta.get("stack_trace"), self.path)

    def desc(self, node: torch.fx.Node) -> str:
        if node.op == "call_function":
            what = "torch." + _name(node.target) if node.target is not LEAF_OP else "module"
            if node.target is LEAF_OP:
                rec = self.records[int(node.args[0])]  # type: ignore[arg-type]
                what = display_path(rec.path)
        else:
            what = str(node.target)
        ln = self.line(node)
        return f"{what} (line {ln})" if ln else what

    # -- values ----------------------------------------------------------------------------------
    def val(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            v = self.env[a]
            if isinstance(v, _Missing):
                raise Unsupported(f"{v.where}: this result of the op is not supported")
            return v
        if isinstance(a, (tuple, list)):
            return type(a)(self.val(x) for x in a)
        return a

    def args(self, n: torch.fx.Node, *spec: tuple[str, Any]) -> list[Any]:
        """Positional-or-keyword arguments by (name, default), evaluated."""
        out = []
        for i, (name, default) in enumerate(spec):
            if i < len(n.args):
                out.append(self.val(n.args[i]))
            else:
                out.append(self.val(n.kwargs.get(name, default)))
        return out

    def output(self, out: Any) -> None:
        items = out if isinstance(out, (tuple, list)) else (out,)
        for item in items:
            val = self.val(item)
            if not isinstance(val, Use):
                raise Unsupported("forward must return a tensor or a tuple of tensors")
            if self.b.dtype_of(val.vid) == "bool":
                raise Unsupported("forward returns a bool tensor")
            val = layout.canonical(val, self.b.storage(val))
            if not layout.is_contiguous(val) or val.vid in self.g.leaves:
                val = self.b.copy(val)
            self.g.outputs.append(val)

    def constant(self, n: torch.fx.Node) -> Use:
        """A tensor made inside forward from a Python number (`torch.tensor(1 / 0.01)`): make_fx
        keeps its value, so it becomes a filled scalar. Larger constants are refused."""
        t = getattr(self.gm, str(n.target), None)
        if (
            isinstance(t, torch.Tensor)
            and t.numel() == 1
            and t.device.type != "meta"
            and t.dtype in (torch.float32, torch.float64, torch.int64, torch.int32)
        ):
            return self.b.fill(float(t.item()), tuple(t.shape))
        raise Unsupported(f"{self.desc(n)}: a constant tensor made inside forward is not supported")

    # -- dispatch --------------------------------------------------------------------------------
    def convert(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            return self.placeholder(n)
        if n.op == "get_attr":
            return self.constant(n)
        if n.op != "call_function":
            raise Unsupported(f"unexpected graph node {n.op}")
        f = n.target
        if f is operator.getitem:
            base = self.val(n.args[0])
            idx = n.args[1]
            if isinstance(base, MinMax):
                return base.values if idx == 0 else self.b.indices(base)
            item = base[idx]
            return _Missing(self.desc(n)) if item is None else item
        if f is LEAF_OP:
            return self.leaf(n)
        if f in self.overloads:
            return self.ew(n, self.overloads[f])
        name = _name(f)
        handler = self.handlers.get(name)
        if handler is None:
            raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")
        return handler(n)

    def placeholder(self, n: torch.fx.Node) -> Any:
        i = self.placeholders
        self.placeholders += 1
        value = n.meta.get("val")
        if i < len(self.state_names):
            name = self.state_names[i]
            t = self._state_tensor(name)
            kind = "param" if isinstance(t, nn.Parameter) else "buffer"
            return self.b.leaf(kind, name, tuple(t.shape), str(t.dtype).removeprefix("torch."))
        k = i - len(self.state_names)
        name = self.input_names[k] if k < len(self.input_names) else f"input{k}"
        if not isinstance(value, torch.Tensor):
            return value
        if value.dtype not in (torch.float32, torch.int64):
            raise Unsupported(f"input `{name}` is {value.dtype}; the builtin coder handles float32")
        self.g.input_names.append(name)
        dtype = str(value.dtype).removeprefix("torch.")
        leaf = self.g.add_leaf("input", name, tuple(value.shape), dtype)
        return Use(leaf.vid, leaf.shape)

    def _state_tensor(self, name: str) -> torch.Tensor:
        obj: Any = self.model
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj

    def leaf(self, n: torch.fx.Node) -> list[Use]:
        rec = self.records[int(n.args[0])]  # type: ignore[arg-type]
        tensors = self.val(n.args[1])
        args, kwargs = rec.rebuild_args(list(tensors))
        fake_out = rec.rebuild_output([t for t in (n.meta.get("val") or [])])
        call = LeafCall(
            self.b, rec.module, rec.path, args, kwargs, fake_out, self.desc(n), self.line(n)
        )
        result = run_leaf(call)
        flat, _ = torch.utils._pytree.tree_flatten(result)
        return [u for u in flat if isinstance(u, Use)]

    def ew(self, n: torch.fx.Node, family: list[EwOp]) -> Any:
        first = family[0]
        name = _name(n.target)
        if first.arity == 2 and first.name in (
            "add",
            "sub",
            "mul",
            "div",
            "pow",
            "maximum",
            "minimum",
        ):
            if n.kwargs.get("rounding_mode") is not None:
                raise Unsupported(f"{self.desc(n)}: division with rounding_mode is not supported")
            self.check_inplace(n)
            x = self.val(n.args[0])
            if name.endswith("_") and isinstance(x, Use) and self._is_counter(x):
                return x  # num_batches_tracked += 1: part of the batch norm's running-stat update
            return self.b.binary(first.name, x, self.val(n.args[1]), n.kwargs.get("alpha", 1))
        params: dict[str, Any] = {}
        for p in first.params:
            pos = p.aten_pos
            if pos is not None and len(n.args) > pos:
                params[p.name] = self.val(n.args[pos])
            elif p.kwarg is not None and p.kwarg in n.kwargs:
                params[p.name] = self.val(n.kwargs[p.kwarg])
            else:
                params[p.name] = p.default
        if name == "clamp_max":
            params = {"lo": None, "hi": self.val(n.args[1])}
        op = select_op(family, params)
        if op is None:
            raise Unsupported(f"{self.desc(n)}: this variant is not supported")
        self.check_inplace(n)
        return self.b.ew_op(op, [self.val(a) for a in n.args[: op.arity]], params)

    def _is_counter(self, u: Use) -> bool:
        leaf = self.g.leaves.get(u.vid)
        path = leaf.path if leaf is not None else None
        return path is not None and path.rpartition(".")[2] == "num_batches_tracked"

    def check_inplace(self, n: torch.fx.Node) -> None:
        """An in-place ATen op is computed out of place: refuse where a view would see it."""
        if not _name(n.target).endswith("_"):
            return
        src = n.args[0]
        if not isinstance(src, torch.fx.Node):
            return
        views = {"view", "_unsafe_view", "slice", "select", "permute", "transpose", "t"}
        views |= {"expand", "unsqueeze", "squeeze", "alias", "split", "unfold", "as_strided"}
        if src.op == "call_function" and _name(src.target) in views:
            raise Unsupported(f"{self.desc(n)}: an in-place op on a view")
        if any(u.op == "call_function" and _name(u.target) in views for u in src.users):
            raise Unsupported(f"{self.desc(n)}: an in-place op on a tensor that has views")

    # -- handlers ------------------------------------------------------------------------------
    def _handlers(self) -> dict[str, Callable[[torch.fx.Node], Any]]:
        b = self.b
        x = lambda n: self.tensor(n, 0)  # noqa: E731
        h: dict[str, Callable[[torch.fx.Node], Any]] = {}

        def reg(*names: str) -> Callable[[Callable[[torch.fx.Node], Any]], Any]:
            def deco(fn: Callable[[torch.fx.Node], Any]) -> Any:
                for nm in names:
                    h[nm] = fn
                return fn

            return deco

        @reg("view", "_unsafe_view", "reshape")
        def _(n: torch.fx.Node) -> Any:
            return b.view(x(n), self.val(n.args[1]))

        @reg("alias", "detach", "lift_fresh_copy", "lift_fresh")
        def _(n: torch.fx.Node) -> Any:
            return self.val(n.args[0])

        @reg("clone", "contiguous")
        def _(n: torch.fx.Node) -> Any:
            return b.contiguous(x(n))

        @reg("_to_copy", "to")
        def _(n: torch.fx.Node) -> Any:
            u = x(n)
            dtype = n.kwargs.get("dtype")
            if dtype in (None, torch.float32) and b.dtype_of(u.vid) == "bool":
                return b.ew(
                    "identity", [b.plain(u, broadcast=False)], shape=u.shape, dtype="float32"
                )
            if dtype not in (None, torch.float32):
                if dtype == torch.bool and b.dtype_of(u.vid) == "bool":
                    return u
                raise Unsupported(f"{self.desc(n)}: a conversion to {dtype} is not supported")
            return u

        @reg("permute")
        def _(n: torch.fx.Node) -> Any:
            return b.permute(x(n), self.val(n.args[1]))

        @reg("transpose")
        def _(n: torch.fx.Node) -> Any:
            return b.transpose(x(n), self.val(n.args[1]), self.val(n.args[2]))

        @reg("t", "numpy_T")
        def _(n: torch.fx.Node) -> Any:
            u = x(n)
            return b.mT(u) if len(u.shape) == 2 else u

        @reg("expand")
        def _(n: torch.fx.Node) -> Any:
            return layout.expand(x(n), tuple(int(d) for d in self.val(n.args[1])))

        @reg("unsqueeze")
        def _(n: torch.fx.Node) -> Any:
            return layout.unsqueeze(x(n), int(self.val(n.args[1])))

        @reg("squeeze")
        def _(n: torch.fx.Node) -> Any:
            d = self.val(n.args[1]) if len(n.args) > 1 else None
            return layout.squeeze(
                x(n), None if d is None else (d,) if isinstance(d, int) else tuple(d)
            )

        @reg("slice")
        def _(n: torch.fx.Node) -> Any:
            u, dim, start, end, step = self.args(
                n, ("self", None), ("dim", 0), ("start", None), ("end", None), ("step", 1)
            )
            return layout.slice_(u, dim, start, end, step)

        @reg("select")
        def _(n: torch.fx.Node) -> Any:
            u, dim, i = x(n), int(self.val(n.args[1])), int(self.val(n.args[2]))
            picked = index_result(self.g, u, (slice(None),) * (dim % len(u.shape)) + (i,))
            return picked if picked is not None else layout.select(u, dim, i)

        @reg("narrow")
        def _(n: torch.fx.Node) -> Any:
            u, dim, start, length = self.args(
                n, ("self", None), ("dim", 0), ("start", 0), ("length", 0)
            )
            return layout.slice_(u, dim, start, start + length)

        @reg("split", "split_with_sizes")
        def _(n: torch.fx.Node) -> Any:
            u, sizes, dim = self.args(n, ("self", None), ("split_size", None), ("dim", 0))
            return b.split(u, sizes, dim)

        @reg("chunk")
        def _(n: torch.fx.Node) -> Any:
            u, chunks, dim = self.args(n, ("self", None), ("chunks", 1), ("dim", 0))
            return b.chunk(u, chunks, dim)

        @reg("unbind")
        def _(n: torch.fx.Node) -> Any:
            u, dim = self.args(n, ("self", None), ("dim", 0))
            return [layout.select(u, dim, i) for i in range(u.shape[dim])]

        @reg("unfold")
        def _(n: torch.fx.Node) -> Any:
            u, dim, size, step = self.args(
                n, ("self", None), ("dimension", 0), ("size", 1), ("step", 1)
            )
            return layout.unfold(u, dim, size, step)

        @reg("repeat")
        def _(n: torch.fx.Node) -> Any:
            return b.repeat(x(n), tuple(int(r) for r in self.val(n.args[1])))

        @reg("cat", "concat")
        def _(n: torch.fx.Node) -> Any:
            tensors, dim = self.args(n, ("tensors", None), ("dim", 0))
            return b.cat(list(tensors), dim)

        @reg("roll")
        def _(n: torch.fx.Node) -> Any:
            u, shifts, dims = self.args(n, ("self", None), ("shifts", ()), ("dims", ()))
            return b.roll(u, shifts, dims)

        @reg("stack")
        def _(n: torch.fx.Node) -> Any:
            tensors, dim = self.args(n, ("tensors", None), ("dim", 0))
            return b.stack(list(tensors), dim)

        @reg("constant_pad_nd")
        def _(n: torch.fx.Node) -> Any:
            u, pads, value = self.args(n, ("self", None), ("pad", ()), ("value", 0.0))
            return b.pad(u, pads, float(value))

        @reg("cumsum")
        def _(n: torch.fx.Node) -> Any:
            if n.kwargs.get("dtype") is not None:
                raise Unsupported(f"{self.desc(n)}: cumsum with a dtype is not supported")
            return b.cumsum(x(n), int(self.val(n.args[1])))

        @reg(
            "ones",
            "zeros",
            "full",
            "ones_like",
            "zeros_like",
            "full_like",
            "new_ones",
            "new_zeros",
            "new_full",
            "scalar_tensor",
        )
        def _(n: torch.fx.Node) -> Any:
            name = _name(n.target)
            shape = _shape(n)
            assert shape is not None
            if name.startswith("ones") or name == "new_ones":
                v = 1.0
            elif name.startswith("zeros") or name == "new_zeros":
                v = 0.0
            elif name == "scalar_tensor":
                v = float(self.val(n.args[0]))
            else:
                v = float(self.val(n.args[1]))
            dtype = n.kwargs.get("dtype")
            out = b.fill(v, shape)
            if dtype == torch.bool:
                node = self.g.node(out.vid)
                assert node is not None
                node.params["dtype"] = "bool"
            elif dtype not in (None, torch.float32):
                raise Unsupported(f"{self.desc(n)}: a {dtype} tensor is not supported")
            return out

        @reg("masked_fill")
        def _(n: torch.fx.Node) -> Any:
            return b.masked_fill(x(n), self.val(n.args[1]), self.val(n.args[2]))

        @reg("rsub")
        def _(n: torch.fx.Node) -> Any:
            return b.binary("sub", self.val(n.args[1]), x(n), n.kwargs.get("alpha", 1))

        @reg("elu")
        def _(n: torch.fx.Node) -> Any:
            u, alpha, scale, in_scale = self.args(
                n, ("self", None), ("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0)
            )
            if float(in_scale) != 1.0:
                raise Unsupported(f"{self.desc(n)}: elu with input_scale is not supported")
            if float(scale) == 1.0507009873554805 and float(alpha) == 1.6732632423543772:
                return b.ew("selu", [b.plain(u)])
            y = b.ew("elu", [b.plain(u)], alpha=float(alpha))
            return y if float(scale) == 1.0 else b.ew("mul", [y, b.operand(float(scale))])

        @reg("sum")
        def _(n: torch.fx.Node) -> Any:
            if n.kwargs.get("dtype") is not None:
                raise Unsupported(f"{self.desc(n)}: reductions with a dtype are not supported")
            u, dim, keep = self.args(n, ("self", None), ("dim", None), ("keepdim", False))
            return b.sum_mean(u, dim, bool(keep), "sum")

        @reg("mean")
        def _(n: torch.fx.Node) -> Any:
            if n.kwargs.get("dtype") is not None:
                raise Unsupported(f"{self.desc(n)}: reductions with a dtype are not supported")
            u, dim, keep = self.args(n, ("self", None), ("dim", None), ("keepdim", False))
            return b.sum_mean(u, dim, bool(keep), "mean")

        @reg("amax", "amin")
        def _(n: torch.fx.Node) -> Any:
            u, dim, keep = self.args(n, ("self", None), ("dim", ()), ("keepdim", False))
            return b.minmax(u, dim, bool(keep), _name(n.target)[1:], pair=False)

        @reg("max", "min")
        def _(n: torch.fx.Node) -> Any:
            kind = _name(n.target)
            if len(n.args) > 1 and isinstance(self.val(n.args[1]), Use):
                return b.binary(
                    "maximum" if kind == "max" else "minimum", x(n), self.val(n.args[1])
                )
            u, dim, keep = self.args(n, ("self", None), ("dim", None), ("keepdim", False))
            if dim is None:
                return b.minmax(u, None, False, kind, pair=False)
            return b.minmax(u, dim, bool(keep), kind, pair=True)

        @reg("argmax", "argmin")
        def _(n: torch.fx.Node) -> Any:
            u, dim, keep = self.args(n, ("self", None), ("dim", None), ("keepdim", False))
            return b.argminmax(u, dim, bool(keep), _name(n.target))

        @reg("logsumexp")
        def _(n: torch.fx.Node) -> Any:
            u, dim, keep = self.args(n, ("self", None), ("dim", None), ("keepdim", False))
            return b.logsumexp(u, dim, bool(keep))

        @reg("linalg_vector_norm")
        def _(n: torch.fx.Node) -> Any:
            u, ord_, dim, keep = self.args(
                n, ("self", None), ("ord", 2), ("dim", None), ("keepdim", False)
            )
            if float(ord_) != 2.0 or n.kwargs.get("dtype") is not None:
                raise Unsupported(f"{self.desc(n)}: only the 2-norm is supported")
            sq = b.ew("square", [b.plain(u)], shape=u.shape)
            total = b.sum_mean(sq, dim, bool(keep), "sum")
            return b.ew("sqrt", [total], shape=total.shape)

        @reg("_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax")
        def _(n: torch.fx.Node) -> Any:
            name = _name(n.target)
            return b.softmax(
                x(n), self.val(n.args[1]), log="log" in name, safe=name == "_safe_softmax"
            )

        @reg("native_layer_norm")
        def _(n: torch.fx.Node) -> Any:
            u, shape, w, bias, eps = self.args(
                n,
                ("input", None),
                ("normalized_shape", None),
                ("weight", None),
                ("bias", None),
                ("eps", 1e-5),
            )
            return (b.layer_norm(u, tuple(shape), w, bias, float(eps)), None, None)

        @reg("native_group_norm")
        def _(n: torch.fx.Node) -> Any:
            u, w, bias, _n, _c, _hw, group, eps = self.args(
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
            return (b.group_norm(u, int(group), w, bias, float(eps)), None, None)

        @reg(
            "_native_batch_norm_legit", "native_batch_norm", "_native_batch_norm_legit_no_training"
        )
        def _(n: torch.fx.Node) -> Any:
            return (self.batch_norm(n), None, None)

        @reg(
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "max_pool2d_with_indices",
            "max_pool3d_with_indices",
        )
        def _(n: torch.fx.Node) -> Any:
            u, k, s, p, d, ceil = self.args(
                n,
                ("self", None),
                ("kernel_size", None),
                ("stride", ()),
                ("padding", 0),
                ("dilation", 1),
                ("ceil_mode", False),
            )
            out = _shape(n) or tuple(n.meta["val"][0].shape)
            y = b.pool("max_pool", u, k, s, p, d, bool(ceil), out)
            return (y, None) if "indices" in _name(n.target) else y

        @reg("avg_pool1d", "avg_pool2d", "avg_pool3d")
        def _(n: torch.fx.Node) -> Any:
            u, k, s, p, ceil, cip, div = self.args(
                n,
                ("self", None),
                ("kernel_size", None),
                ("stride", ()),
                ("padding", 0),
                ("ceil_mode", False),
                ("count_include_pad", True),
                ("divisor_override", None),
            )
            if not cip or div:
                raise Unsupported(f"{self.desc(n)}: this average pooling variant is not supported")
            return b.pool("avg_pool", u, k, s, p, 1, bool(ceil), _shape(n))  # type: ignore[arg-type]

        @reg(
            "_adaptive_avg_pool2d",
            "adaptive_avg_pool2d",
            "adaptive_avg_pool1d",
            "_adaptive_avg_pool3d",
            "adaptive_avg_pool3d",
        )
        def _(n: torch.fx.Node) -> Any:
            return b.adaptive_pool(x(n), self.val(n.args[1]), "avg")

        @reg("adaptive_max_pool2d", "adaptive_max_pool1d", "adaptive_max_pool3d")
        def _(n: torch.fx.Node) -> Any:
            return (b.adaptive_pool(x(n), self.val(n.args[1]), "max"), None)

        @reg("mm", "bmm", "matmul")
        def _(n: torch.fx.Node) -> Any:
            return b.matmul(x(n), self.val(n.args[1]))

        @reg("addmm")
        def _(n: torch.fx.Node) -> Any:
            bias, m1, m2 = (self.val(a) for a in n.args[:3])
            return b.addmm(bias, m1, m2, n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1))

        @reg("baddbmm")
        def _(n: torch.fx.Node) -> Any:
            bias, m1, m2 = (self.val(a) for a in n.args[:3])
            beta, alpha = self.val(n.kwargs.get("beta", 1)), self.val(n.kwargs.get("alpha", 1))
            prod = b.matmul(m1, m2)
            if alpha != 1:
                prod = b.ew("mul", [prod, b.operand(float(alpha))], shape=prod.shape)
            if beta == 0:
                return prod
            term = b.operand(bias)
            if beta != 1:
                term = b.ew("mul", [term, b.operand(float(beta))])
            return b.ew("add", [prod, term], shape=prod.shape)

        @reg("linear")
        def _(n: torch.fx.Node) -> Any:
            u, w, bias = self.args(n, ("input", None), ("weight", None), ("bias", None))
            return b.linear(u, w, bias)

        @reg("convolution")
        def _(n: torch.fx.Node) -> Any:
            u, w, bias, stride, pad, dil, transposed, out_pad, groups = self.args(
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
            return b.conv(
                u,
                w,
                bias,
                stride=stride,
                padding=pad,
                dilation=dil,
                groups=int(groups),
                transposed=bool(transposed),
                output_padding=out_pad,
                out=_shape(n),  # type: ignore[arg-type]
            )

        @reg("dropout", "native_dropout", "feature_dropout", "alpha_dropout")
        def _(n: torch.fx.Node) -> Any:
            u, p, train = self.args(n, ("input", None), ("p", 0.5), ("train", True))
            if train is not False and float(p) > 0:
                raise Unsupported(f"{self.desc(n)}: dropout in training mode is random")
            return (u, None) if _name(n.target) == "native_dropout" else u

        @reg("randn", "rand")
        def _(n: torch.fx.Node) -> Any:  # an initial state drawn in forward (h0 = randn)
            kwargs = {k: self.val(v) for k, v in n.kwargs.items()}
            for k in ("layout", "pin_memory"):
                kwargs.pop(k, None)
            return factory_leaf(b, _name(n.target), list(self.val(n.args[0])), kwargs)

        @reg(
            "bernoulli",
            "randint",
            "normal",
            "uniform",
            "rand_like",
            "randn_like",
            "randperm",
            "multinomial",
        )
        def _(n: torch.fx.Node) -> Any:
            raise Unsupported(f"{self.desc(n)}: random numbers inside forward cannot be checked")

        @reg("copy_", "copy")
        def _(n: torch.fx.Node) -> Any:
            dst, src = n.args[0], self.val(n.args[1])
            if not (isinstance(dst, torch.fx.Node) and dst.op == "placeholder"):
                raise Unsupported(f"{self.desc(n)}: copy_ into a computed tensor is not supported")
            leaf = self.env[dst]
            target = self.g.leaves.get(leaf.vid)
            if target is None or target.path not in self.plain:
                what = target.expr if target is not None else "an input"
                raise Unsupported(f"{self.desc(n)}: an in-place update of {what}")
            value = b.contiguous(layout.expand(b.tensor(src), leaf.shape))
            self.env[dst] = value
            return value

        @reg("embedding")
        def _(n: torch.fx.Node) -> Any:
            raise Unsupported(
                f"{self.desc(n)}: embedding with integer indices is not supported yet"
            )

        return h

    def tensor(self, n: torch.fx.Node, i: int) -> Use:
        v = self.val(n.args[i])
        if not isinstance(v, Use):
            raise Unsupported(f"{self.desc(n)}: expected a tensor argument")
        return v

    def batch_norm(self, n: torch.fx.Node) -> Use:
        name = _name(n.target)
        overload = getattr(n.target, "_overloadname", "default")
        if name == "_native_batch_norm_legit_no_training":
            u, w, bias, rm, rv, momentum, eps = self.args(
                n,
                ("input", None),
                ("weight", None),
                ("bias", None),
                ("running_mean", None),
                ("running_var", None),
                ("momentum", 0.1),
                ("eps", 1e-5),
            )
            training = False
        elif overload == "no_stats":
            u, w, bias, training, momentum, eps = self.args(
                n,
                ("input", None),
                ("weight", None),
                ("bias", None),
                ("training", True),
                ("momentum", 0.1),
                ("eps", 1e-5),
            )
            rm = rv = None
        else:
            u, w, bias, rm, rv, training, momentum, eps = self.args(
                n,
                ("input", None),
                ("weight", None),
                ("bias", None),
                ("running_mean", None),
                ("running_var", None),
                ("training", True),
                ("momentum", 0.1),
                ("eps", 1e-5),
            )
        running = None
        module = ""
        if isinstance(rm, Use) and isinstance(rv, Use):
            rm_leaf = self.g.leaves.get(rm.vid)
            rm_path = (rm_leaf.path if rm_leaf is not None else None) or ""
            owner, _, last = rm_path.rpartition(".")
            if last != "running_mean":
                raise Unsupported(f"{self.desc(n)}: running statistics that are not a module's")
            module = owner
            nbt = None
            if training:
                counter = f"{owner}.num_batches_tracked" if owner else "num_batches_tracked"
                if counter not in self.state_names:
                    raise Unsupported(f"{self.desc(n)}: batch norm without num_batches_tracked")
                t = self._state_tensor(counter)
                nbt = self.b.leaf(
                    "buffer", counter, tuple(t.shape), str(t.dtype).removeprefix("torch.")
                )
            running = (rm, rv, nbt)
        return self.b.batch_norm(
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


# Past this many ATen ops the forward is an unrolled loop, not a program worth one kernel each.
MAX_ATEN_NODES = 20000


def capture_aten(
    model: nn.Module, inputs: list[Any], input_names: list[str], path: str | None
) -> Graph:
    for name, mod in model.named_modules():
        if isinstance(mod, nn.RNNBase) and leaf_rule(mod) is None:
            raise Unsupported(
                f"self.{name} ({type(mod).__name__}) is not supported: a recurrent module is "
                "captured whole or not at all (at the ATen level it unrolls step by step)"
            )
    try:
        gm, names, plain, records = trace(model, inputs)
    except Unsupported:
        raise
    except Exception as exc:
        raise Unsupported(
            f"ATen-level capture failed: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    count = len(gm.graph.nodes)
    if count > MAX_ATEN_NODES:
        raise Unsupported(f"forward unrolls into {count} ATen ops (more than {MAX_ATEN_NODES})")
    return AtenConverter(gm, names, plain, records, model, inputs, input_names, path).run()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
