"""The fx path: symbolic tracing at the level the reference was written (modules, torch functions,
tensor methods), so kernels and refusals carry the reference's own names and line numbers.

Proxies know their concrete shapes (each op also runs on meta tensors while it is traced), so
Python over shapes (`B, T, C = x.size()`, `C // self.n_head`, slicing a buffer with `[:T]`) traces
to plain ints.
"""

from __future__ import annotations

import contextlib
import math
import operator
import re
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx import _symbolic_trace

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import Builder, MinMax, select_op
from stitch_lsp.compiler.catalog import EwOp
from stitch_lsp.compiler.ir import Graph, Shape, Unsupported, Use
from stitch_lsp.compiler.recurrent import index_result
from stitch_lsp.compiler.worker.capture_leaves import (
    LeafCall,
    leaf_outputs,
    plain_attributes,
    run_leaf,
)
from stitch_lsp.compiler.worker.recurrent_capture import factory_leaf
from stitch_lsp.compiler.worker.spelling import leaf_rule, tables

_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (\w+)')


def line_in(stack_trace: str | None, path: str | None) -> int | None:
    """The innermost line of the reference file in a stack trace (else of any `forward`)."""
    frames = _FRAME.findall(stack_trace or "")
    mine = [int(ln) for f, ln, _ in frames if path is not None and f == path]
    if mine:
        return mine[-1]
    fwd = [int(ln) for _, ln, fn in frames if fn == "forward"]
    return fwd[-1] if fwd else None


# -- tracing with concrete shapes -----------------------------------------------------------------


def _meta(v: Any) -> Any:
    if isinstance(v, _ShapedProxy):
        return v.meta_value
    if isinstance(v, torch.fx.Proxy):  # an attribute proxy: its node carries the value
        return v.node.meta.get("val")
    if isinstance(v, (tuple, list)):
        return type(v)(_meta(x) for x in v)
    if isinstance(v, dict):
        return {k: _meta(x) for k, x in v.items()}
    if isinstance(v, slice):
        return slice(_meta(v.start), _meta(v.stop), _meta(v.step))
    return v


class _ShapedProxy(torch.fx.Proxy):
    """A proxy that answers shape questions with the ints its meta tensor has."""

    meta_value: Any = None

    def _tensor(self) -> torch.Tensor | None:
        v = self.meta_value
        return v if isinstance(v, torch.Tensor) else None

    def size(self, dim: int | None = None) -> Any:
        t = self._tensor()
        if t is None:
            return self.__getattr__("size")(dim) if dim is not None else self.__getattr__("size")()
        return t.size() if dim is None else t.size(dim)

    def dim(self) -> Any:
        t = self._tensor()
        return t.dim() if t is not None else self.__getattr__("dim")()

    def numel(self) -> Any:
        t = self._tensor()
        return t.numel() if t is not None else self.__getattr__("numel")()

    @property
    def shape(self) -> Any:
        t = self._tensor()
        return t.shape if t is not None else self.__getattr__("shape")

    @property
    def ndim(self) -> Any:
        t = self._tensor()
        return t.dim() if t is not None else self.__getattr__("ndim")

    @property
    def dtype(self) -> Any:
        t = self._tensor()
        return t.dtype if t is not None else self.__getattr__("dtype")

    @property
    def device(self) -> Any:
        t = self._tensor()
        return t.device if t is not None else self.__getattr__("device")

    def __len__(self) -> int:
        t = self._tensor()
        if t is not None and t.dim() > 0:
            return int(t.shape[0])
        v = self.meta_value
        if isinstance(v, (tuple, list)):
            return len(v)
        raise torch.fx.proxy.TraceError("len() of a traced value")


class Tracer(torch.fx.Tracer):
    record_stack_traces = True

    def __init__(self, inputs: list[Any]) -> None:
        super().__init__()
        self.inputs = inputs
        self.next_input = 0
        # Buffers become graph values (so `self.bias[:, :, :T, :T]` is traced, not evaluated).
        self.proxy_buffer_attributes = True

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return leaf_rule(m) is not None or super().is_leaf_module(m, qualname)

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _ShapedProxy(node, self)

    def create_proxy(
        self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None
    ):
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        if isinstance(p, _ShapedProxy):
            p.meta_value = self._run_meta(kind, target, args, kwargs)
            p.node.meta["val"] = p.meta_value
        return p

    def _run_meta(self, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
        # Modules run unpatched here: the tracer's Module.__call__ would record them again.
        patched_call, patched_getattr = nn.Module.__call__, nn.Module.__getattr__
        nn.Module.__call__ = _symbolic_trace._orig_module_call  # type: ignore[method-assign]
        nn.Module.__getattr__ = _symbolic_trace._orig_module_getattr  # type: ignore[method-assign]
        self.in_meta = True
        try:
            return self._meta_value(kind, target, args, kwargs)
        finally:
            self.in_meta = False
            nn.Module.__call__ = patched_call  # type: ignore[method-assign]
            nn.Module.__getattr__ = patched_getattr  # type: ignore[method-assign]

    def _meta_value(self, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
        try:
            if kind == "placeholder":
                i = self.next_input
                self.next_input += 1
                return self.inputs[i] if i < len(self.inputs) else None
            margs, mkwargs = _meta(args), _meta(kwargs)
            leftover: list[Any] = []
            torch.fx.node.map_aggregate(
                (margs, mkwargs),
                lambda a: leftover.append(a) if isinstance(a, torch.fx.Proxy) else None,
            )
            if leftover:
                return None
            if kind == "call_function":
                return target(*margs, **mkwargs)
            if kind == "call_method":
                return getattr(margs[0], target)(*margs[1:], **mkwargs)
            if kind == "call_module":
                mod = self.root.get_submodule(target)
                if leaf_rule(mod) is not None:
                    return leaf_outputs(mod, tuple(margs), dict(mkwargs))
                if isinstance(mod, nn.RNNBase):  # refused anyway; on meta it runs every step
                    return None
                return mod(*margs, **mkwargs)
            if kind == "get_attr":
                obj: Any = self.root
                for part in str(target).split("."):
                    obj = getattr(obj, part)
                return obj
        except Exception:  # the shape stays unknown; the converter says so if it matters
            return None
        return None


# Tensor factories called with plain ints (shapes are ints here) would run eagerly and become
# anonymous constants; while tracing they are recorded as graph nodes instead.
_FACTORIES: tuple[str, ...] = ("zeros", "ones", "full", "empty", "eye", "arange", "tensor")
_FACTORIES += ("rand", "randn", "randint", "randperm", "normal")


@contextlib.contextmanager
def _traced_factories(tracer: torch.fx.Tracer) -> Iterator[None]:
    saved = {name: getattr(torch, name) for name in _FACTORIES}

    def wrap(fn: Any) -> Any:
        def traced(*args: Any, **kwargs: Any) -> Any:
            if getattr(tracer, "in_meta", False):  # a module running on meta tensors
                return fn(*args, **kwargs)
            return tracer.create_proxy("call_function", fn, args, kwargs)

        return traced

    try:
        for name, fn in saved.items():
            setattr(torch, name, wrap(fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


def trace(model: nn.Module, inputs: list[Any]) -> torch.fx.GraphModule:
    """Trace forward; arguments that get_inputs does not pass keep their defaults (so an
    `if h0 is None:` takes the branch the reference takes)."""
    from stitch_lsp.compiler.worker.capture import defaulted_args

    concrete = defaulted_args(model, len(inputs))
    tracer = Tracer(inputs)
    with _traced_factories(tracer):
        graph = tracer.trace(model, concrete_args=concrete or None)
    return torch.fx.GraphModule(model, graph)


# -- conversion -----------------------------------------------------------------------------------

_VIEW_METHODS = {"view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as"}
_VIEW_METHODS |= {"permute", "transpose", "t", "narrow", "split", "chunk", "unbind", "expand"}
_VIEW_METHODS |= {"expand_as", "unfold", "contiguous", "__getitem__"}


class FxConverter:
    def __init__(self, gm: torch.fx.GraphModule, inputs: list[Any], path: str | None) -> None:
        self.gm = gm
        self.inputs = inputs
        self.path = path
        self.b = Builder()
        self.env: dict[torch.fx.Node, Any] = {}
        self.attr_values: dict[str, Use] = {}  # plain tensor attributes overwritten by copy_
        self.placeholders = 0
        self.registered = {name for name, _ in gm.named_parameters()}
        self.registered |= {name for name, _ in gm.named_buffers()}
        self.plain = {id(t): name for name, t in plain_attributes(gm).items()}
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.functions, self.methods, self.modules, _ = tables()

    @property
    def g(self) -> Graph:
        return self.b.g

    def run(self) -> Graph:
        for node in self.gm.graph.nodes:
            self.b.at(self.desc(node), self.line(node), self.shape_or_none(node))
            if node.op == "output":
                self.output(node.args[0])
                continue
            self.env[node] = self.convert(node)
        self.g.prune()
        return self.g

    # -- node facts ------------------------------------------------------------------------------
    def line(self, node: torch.fx.Node) -> int | None:
        return line_in(node.meta.get("stack_trace"), self.path)

    def desc(self, node: torch.fx.Node) -> str:
        if node.op == "call_module":
            what = display_path(str(node.target))
        elif node.op == "call_method":
            what = f".{node.target}()"
        elif node.op in ("placeholder", "output", "get_attr"):
            what = str(node.target)
        else:
            what = getattr(node.target, "__name__", str(node.target))
        ln = self.line(node)
        return f"{what} (line {ln})" if ln else what

    @staticmethod
    def shape_or_none(node: torch.fx.Node) -> Shape | None:
        v = node.meta.get("val")
        if isinstance(v, torch.Tensor):
            return tuple(int(d) for d in v.shape)
        return None

    def shape(self, node: torch.fx.Node) -> Shape:
        s = self.shape_or_none(node)
        if s is None:
            raise Unsupported(
                f"{self.desc(node)}: its shape is unknown (it failed on meta tensors)"
            )
        v = node.meta["val"]
        if v.dtype not in (torch.float32, torch.bool, torch.int64):
            raise Unsupported(
                f"{self.desc(node)} produces {v.dtype}; the builtin coder handles float32"
            )
        return s

    # -- values ----------------------------------------------------------------------------------
    def val(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (tuple, list)):
            return type(a)(self.val(x) for x in a)
        if isinstance(a, dict):
            return {k: self.val(x) for k, x in a.items()}
        if isinstance(a, slice):
            return slice(self.val(a.start), self.val(a.stop), self.val(a.step))
        return a

    def arg(self, n: torch.fx.Node, i: int, name: str, default: Any = None) -> Any:
        if len(n.args) > i:
            return self.val(n.args[i])
        return self.val(n.kwargs.get(name, default))

    def tensor(self, n: torch.fx.Node, i: int = 0, name: str = "input") -> Use:
        v = self.arg(n, i, name)
        if not isinstance(v, Use):
            raise Unsupported(f"{self.desc(n)}: expected a tensor argument")
        return v

    def output(self, out: Any) -> None:
        items = out if isinstance(out, (tuple, list)) else (out,)
        for item in items:
            val = self.val(item)
            if not isinstance(val, Use):
                raise Unsupported("forward must return a tensor or a tuple of tensors")
            self.g.outputs.append(self.b_output(val))

    def b_output(self, u: Use) -> Use:
        if self.b.dtype_of(u.vid) == "bool":
            raise Unsupported("forward returns a bool tensor")
        u = layout.canonical(u, self.b.storage(u))
        if not layout.is_contiguous(u) or u.vid in self.g.leaves:
            u = self.b.copy(u)
        return u

    def param(self, module_path: str, name: str) -> Use | None:
        mod = self.gm.get_submodule(module_path)
        t = getattr(mod, name, None)
        if not isinstance(t, torch.Tensor):
            return None
        key = f"{module_path}.{name}" if module_path else name
        kind = "param" if isinstance(t, nn.Parameter) else "buffer"
        return self.b.leaf(kind, key, tuple(t.shape), str(t.dtype).removeprefix("torch."))

    # -- dispatch --------------------------------------------------------------------------------
    def convert(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            return self.placeholder(n)
        if n.op == "get_attr":
            return self.get_attr(n)
        if n.op == "call_module":
            return self.module(n, self.gm.get_submodule(str(n.target)))
        if n.op == "call_method":
            return self.method(n)
        if n.op == "call_function":
            return self.function(n)
        raise Unsupported(f"unexpected graph node {n.op}")

    def placeholder(self, n: torch.fx.Node) -> Any:
        idx = self.placeholders
        self.placeholders += 1
        if idx >= len(self.inputs):  # an argument get_inputs does not pass: its default
            return n.args[0] if n.args else None
        value = self.inputs[idx]
        self.g.input_names.append(str(n.target))
        if not isinstance(value, torch.Tensor):
            raise Unsupported(
                f"forward input `{n.target}` is not a tensor ({type(value).__name__})"
            )
        if value.dtype not in (torch.float32, torch.int64):
            raise Unsupported(
                f"input `{n.target}` is {value.dtype}; the builtin coder handles float32"
            )
        dtype = str(value.dtype).removeprefix("torch.")
        leaf = self.g.add_leaf("input", str(n.target), tuple(value.shape), dtype)
        return Use(leaf.vid, leaf.shape)

    def get_attr(self, n: torch.fx.Node) -> Any:
        target = str(n.target)
        t: Any = self.gm
        for part in target.split("."):
            t = getattr(t, part)
        if isinstance(t, torch.Tensor) and target not in self.registered:
            # a plain tensor attribute, which fx lifts as a constant: find its own name
            target = self.plain.get(id(t), "")
            if not target:
                raise Unsupported(f"{self.desc(n)}: a tensor made while tracing is not supported")
        if target in self.attr_values:
            return self.attr_values[target]
        if not isinstance(t, torch.Tensor):
            return t
        kind = "param" if isinstance(t, nn.Parameter) else "buffer"
        return self.b.leaf(kind, target, tuple(t.shape), str(t.dtype).removeprefix("torch."))

    def check_inplace(self, n: torch.fx.Node, inplace: bool) -> None:
        """An in-place op is computed out of place: fine unless its input is read later."""
        src = n.args[0] if n.args else None
        if not inplace or not isinstance(src, torch.fx.Node):
            return
        later = [u for u in src.users if u is not n and self.order[u] > self.order[n]]
        if later:
            raise Unsupported(f"{self.desc(n)}: an in-place op whose input is used again")
        if src.op == "call_method" and src.target in _VIEW_METHODS:
            raise Unsupported(f"{self.desc(n)}: an in-place op on a view")

    def ew_call(self, n: torch.fx.Node, family: list[EwOp], module: nn.Module | None) -> Any:
        first = family[0]
        params: dict[str, Any] = {}
        for p in first.params:
            if module is not None:
                params[p.name] = getattr(module, p.attr, p.default) if p.attr else p.default
            elif p.arg is not None and len(n.args) > p.arg:
                params[p.name] = self.val(n.args[p.arg])
            elif p.kwarg is not None and p.kwarg in n.kwargs:
                params[p.name] = self.val(n.kwargs[p.kwarg])
            else:
                params[p.name] = p.default
        op = select_op(family, params)
        if op is None:
            if first.name.startswith("clamp"):
                raise Unsupported(f"{self.desc(n)}: clamp without bounds")
            raise Unsupported(f"{self.desc(n)}: this variant is not supported")
        if op.arity == 2 and op.name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum"):
            if n.kwargs.get("rounding_mode") is not None:
                raise Unsupported(f"{self.desc(n)}: division with rounding_mode is not supported")
            other = self.val(n.args[1]) if len(n.args) > 1 else self.val(n.kwargs.get("other"))
            return self.b.binary(op.name, self.val(n.args[0]), other, n.kwargs.get("alpha", 1))
        if module is not None:
            operands = [self.val(n.args[0])]
        else:
            operands = [self.val(a) for a in n.args[: op.arity]]
        return self.b.ew_op(op, operands, params)

    # -- torch functions -------------------------------------------------------------------------
    def function(self, n: torch.fx.Node) -> Any:
        f = n.target
        b = self.b
        self.check_inplace(n, bool(n.kwargs.get("inplace", False)) or f in _INPLACE_OPERATORS)
        if f is operator.getitem:
            return self.getitem(n)
        if f is _symbolic_trace._assert_is_none:  # a default None argument, checked by fx
            return None
        if f is getattr:
            return self.getattr(n)
        if f in _INT_OPS and all(not isinstance(self.val(a), Use) for a in n.args):
            return _INT_OPS[f](*[self.val(a) for a in n.args])
        if f in self.functions:
            return self.ew_call(n, self.functions[f], None)
        x = lambda: self.tensor(n)  # noqa: E731
        a = lambda i, name, d=None: self.arg(n, i, name, d)  # noqa: E731
        if f in (torch.flatten,):
            return b.flatten(x(), a(1, "start_dim", 0), a(2, "end_dim", -1))
        if f is torch.reshape:
            return b.view(x(), a(1, "shape"))
        if f is torch.squeeze:
            d = a(1, "dim")
            return layout.squeeze(
                x(), None if d is None else (d,) if isinstance(d, int) else tuple(d)
            )
        if f is torch.unsqueeze:
            return layout.unsqueeze(x(), a(1, "dim"))
        if f in (torch.clone, torch.detach):
            return x()
        if f is torch.permute:
            return b.permute(x(), a(1, "dims"))
        if f in (torch.transpose, torch.swapaxes, torch.swapdims):
            return b.transpose(x(), a(1, "dim0"), a(2, "dim1"))
        if f is torch.t:
            return b.mT(x())
        if f is torch.narrow:
            start, length = a(2, "start"), a(3, "length")
            return layout.slice_(x(), a(1, "dim"), start, start + length)
        if f is torch.split:
            return b.split(x(), a(1, "split_size_or_sections"), a(2, "dim", 0))
        if f is torch.chunk:
            return b.chunk(x(), a(1, "chunks"), a(2, "dim", 0))
        if f is torch.unbind:
            u, d = x(), a(1, "dim", 0)
            return [layout.select(u, d, i) for i in range(u.shape[d])]
        if f in (torch.cat, torch.concat, torch.concatenate):
            return b.cat(list(a(0, "tensors")), a(1, "dim", 0))
        if f is torch.stack:
            return b.stack(list(a(0, "tensors")), a(1, "dim", 0))
        if f is torch.roll:
            return b.roll(x(), a(1, "shifts"), a(2, "dims", None))
        if f is F.pad:
            if a(2, "mode", "constant") != "constant":
                raise Unsupported(f"{self.desc(n)}: padding mode {a(2, 'mode')!r} is not supported")
            return b.pad(x(), a(1, "pad"), float(a(3, "value", 0.0) or 0.0))
        if f is torch.cumsum:
            return self.cumsum(n)
        if f in _FACTORY_VALUES or f is torch.full:
            return self.factory(n)
        if f is torch.tensor:
            value = self.val(n.args[0]) if n.args else None
            dtype = n.kwargs.get("dtype")
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and (dtype in (None, torch.float32))
            ):
                return b.fill(float(value), ())  # a scalar from a Python number
            raise Unsupported(f"{self.desc(n)}: only a tensor of one Python number is supported")
        if f in (torch.randn, torch.rand):  # an initial state drawn in forward (h0 = randn)
            return factory_leaf(self.b, f.__name__, self.val(n.args), self.val(n.kwargs))
        if f in _RANDOM:
            raise Unsupported(f"{self.desc(n)}: random numbers inside forward cannot be checked")
        if f is torch.full_like:
            return b.fill(float(a(1, "fill_value")), self.shape(n))
        if f is torch.masked_fill:
            return b.masked_fill(x(), a(1, "mask"), a(2, "value"))
        if f in (torch.max, torch.min, torch.amax, torch.amin):
            kind = "max" if f in (torch.max, torch.amax) else "min"
            return self.minmax(n, kind, amax=f in (torch.amax, torch.amin))
        if f in (torch.argmax, torch.argmin):
            kind = "argmax" if f is torch.argmax else "argmin"
            return b.argminmax(x(), a(1, "dim"), bool(a(2, "keepdim", False)), kind)
        if f in (torch.sum, torch.mean):
            return self.sum_mean(n, "sum" if f is torch.sum else "mean")
        if f is torch.logsumexp:
            return b.logsumexp(x(), a(1, "dim"), bool(a(2, "keepdim", False)))
        if f in (torch.softmax, F.softmax, torch.log_softmax, F.log_softmax):
            log = f in (torch.log_softmax, F.log_softmax)
            return b.softmax(x(), a(1, "dim"), log=log)
        if f in (F.max_pool1d, F.max_pool2d, F.max_pool3d):
            if a(6, "return_indices", False):
                raise Unsupported(f"{self.desc(n)}: max pooling with indices is not supported")
            return b.pool(
                "max_pool",
                x(),
                a(1, "kernel_size"),
                a(2, "stride"),
                a(3, "padding", 0),
                a(4, "dilation", 1),
                bool(a(5, "ceil_mode", False)),
                self.shape(n),
            )
        if f in (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d):
            if not a(5, "count_include_pad", True) or a(6, "divisor_override"):
                raise Unsupported(f"{self.desc(n)}: this average pooling variant is not supported")
            return b.pool(
                "avg_pool",
                x(),
                a(1, "kernel_size"),
                a(2, "stride"),
                a(3, "padding", 0),
                1,
                bool(a(4, "ceil_mode", False)),
                self.shape(n),
            )
        if f in (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d):
            return b.adaptive_pool(x(), a(1, "output_size"), "avg")
        if f in (F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d):
            if a(2, "return_indices", False):
                raise Unsupported(f"{self.desc(n)}: max pooling with indices is not supported")
            return b.adaptive_pool(x(), a(1, "output_size"), "max")
        if f in (torch.matmul, operator.matmul, torch.mm, torch.bmm):
            return b.matmul(self.val(n.args[0]), self.val(n.args[1]))
        if f is F.linear:
            return b.linear(x(), a(1, "weight"), a(2, "bias"))
        if f is torch.addmm:
            return b.addmm(
                a(0, "input"), a(1, "mat1"), a(2, "mat2"), a(3, "beta", 1), a(4, "alpha", 1)
            )
        if f is F.layer_norm:
            return b.layer_norm(
                x(),
                tuple(a(1, "normalized_shape")),
                a(2, "weight"),
                a(3, "bias"),
                float(a(4, "eps", 1e-5)),
            )
        if f is F.group_norm:
            return b.group_norm(
                x(), int(a(1, "num_groups")), a(2, "weight"), a(3, "bias"), float(a(4, "eps", 1e-5))
            )
        if f in (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout):
            if a(2, "training", True) and float(a(1, "p", 0.5)) > 0:
                raise Unsupported(f"{self.desc(n)}: dropout in training mode is random")
            return x()
        if f is F.scaled_dot_product_attention:
            return b.attention(
                x(),
                self.tensor(n, 1, "key"),
                self.tensor(n, 2, "value"),
                a(3, "attn_mask"),
                bool(a(5, "is_causal", False)),
                a(6, "scale"),
                float(a(4, "dropout_p", 0.0)),
            )
        if f is F.normalize:
            return self.normalize(n)
        if f is F.embedding:
            if a(3, "max_norm") is not None:
                raise Unsupported(f"{self.desc(n)}: embedding with max_norm renormalises weights")
            return b.embedding(a(1, "weight"), x())
        if f is torch.einsum:
            raise Unsupported(f"{self.desc(n)}: einsum is captured at the ATen level")
        raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")

    def getitem(self, n: torch.fx.Node) -> Any:
        base = self.val(n.args[0])
        idx = self.val(n.args[1])
        if isinstance(base, MinMax):
            if idx == 0:
                return base.values
            if idx == 1:
                return self.b.indices(base)
        if isinstance(base, (tuple, list, torch.Size)):
            return base[idx]
        if isinstance(base, Use):
            picked = index_result(self.g, base, idx)  # a time step of a recurrent module
            return picked if picked is not None else self.b.index(base, idx)
        raise Unsupported(f"{self.desc(n)}: indexing {type(base).__name__} is not supported")

    def getattr(self, n: torch.fx.Node) -> Any:
        base = self.val(n.args[0])
        attr = n.args[1]
        if isinstance(base, MinMax):
            if attr == "values":
                return base.values
            if attr == "indices":
                return self.b.indices(base)
        if isinstance(base, Use):
            if attr == "shape":
                return torch.Size(base.shape)
            if attr in ("T", "mT"):
                return self.b.mT(base)
            if attr == "ndim":
                return len(base.shape)
            if attr == "device":
                return torch.device("meta")
            if attr == "dtype":
                return torch.float32
        raise Unsupported(f"{self.desc(n)}: attribute {attr!r} is not supported")

    def factory(self, n: torch.fx.Node) -> Use:
        f = n.target
        v = float(self.arg(n, 1, "fill_value")) if f is torch.full else _FACTORY_VALUES[f]
        dtype = n.kwargs.get("dtype")
        out = self.b.fill(v, self.shape(n))
        if dtype == torch.bool:
            node = self.g.node(out.vid)
            assert node is not None
            node.params["dtype"] = "bool"
        elif dtype not in (None, torch.float32):
            raise Unsupported(f"{self.desc(n)}: a {dtype} tensor is not supported")
        return out

    def cumsum(self, n: torch.fx.Node) -> Use:
        if n.kwargs.get("dtype") is not None:
            raise Unsupported(f"{self.desc(n)}: cumsum with a dtype is not supported")
        return self.b.cumsum(self.tensor(n), int(self.arg(n, 1, "dim")))

    def minmax(self, n: torch.fx.Node, kind: str, amax: bool) -> Any:
        x = self.tensor(n)
        other = self.arg(n, 1, "dim")
        if isinstance(other, Use):
            return self.b.binary("maximum" if kind == "max" else "minimum", x, other)
        keepdim = bool(self.arg(n, 2, "keepdim", False))
        pair = other is not None and not amax
        return self.b.minmax(x, other, keepdim, kind, pair)

    def sum_mean(self, n: torch.fx.Node, kind: str) -> Use:
        if n.kwargs.get("dtype") is not None:
            raise Unsupported(f"{self.desc(n)}: reductions with a dtype are not supported")
        return self.b.sum_mean(
            self.tensor(n), self.arg(n, 1, "dim"), bool(self.arg(n, 2, "keepdim", False)), kind
        )

    def normalize(self, n: torch.fx.Node) -> Use:
        x = self.tensor(n)
        p, dim, eps = (
            self.arg(n, 1, "p", 2.0),
            self.arg(n, 2, "dim", 1),
            self.arg(n, 3, "eps", 1e-12),
        )
        if float(p) != 2.0:
            raise Unsupported(f"{self.desc(n)}: normalize with p={p} is not supported")
        b = self.b
        sq = b.ew("square", [b.plain(x)], shape=x.shape)
        total = b.sum_mean(sq, dim, True, "sum")
        norm = b.ew("sqrt", [total], shape=total.shape)
        norm = b.ew("clamp_min", [norm], shape=total.shape, lo=float(eps))
        return b.ew("div", [b.plain(x), norm], shape=x.shape)

    # -- tensor methods --------------------------------------------------------------------------
    def method(self, n: torch.fx.Node) -> Any:
        m = str(n.target)
        b = self.b
        self.check_inplace(n, m.endswith("_") and m not in ("copy_",))
        self_v = self.val(n.args[0])
        if isinstance(self_v, MinMax):
            raise Unsupported(f"{self.desc(n)} on a (values, indices) pair")
        if m == "size":
            base = self.tensor(n)
            dim = self.arg(n, 1, "dim")
            return torch.Size(base.shape) if dim is None else base.shape[dim]
        if m == "dim":
            return len(self.tensor(n).shape)
        if m == "numel":
            return math.prod(self.tensor(n).shape)
        if m in self.methods:
            return self.ew_call(n, self.methods[m], None)
        x = self.tensor(n)
        rest = [self.val(v) for v in n.args[1:]]
        if m in ("view", "reshape"):
            shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            if not shape:
                shape = self.val(n.kwargs.get("shape") or n.kwargs.get("size"))
            return b.view(x, shape)
        if m in ("view_as", "reshape_as"):
            return b.view(x, rest[0].shape)
        if m == "flatten":
            return b.flatten(x, self.arg(n, 1, "start_dim", 0), self.arg(n, 2, "end_dim", -1))
        if m == "squeeze":
            d = self.arg(n, 1, "dim")
            return layout.squeeze(
                x, None if d is None else (d,) if isinstance(d, int) else tuple(d)
            )
        if m == "unsqueeze":
            return layout.unsqueeze(x, self.arg(n, 1, "dim"))
        if m in ("contiguous",):
            return b.contiguous(x)
        if m in ("clone", "detach", "float", "to", "cuda", "cpu", "type_as", "requires_grad_"):
            if m == "to" and any(isinstance(v, torch.dtype) and v != torch.float32 for v in rest):
                raise Unsupported(f"{self.desc(n)}: a dtype conversion is not supported")
            return x
        if m in ("expand", "broadcast_to"):
            shape = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            return layout.expand(x, tuple(int(d) for d in shape))
        if m == "expand_as":
            return layout.expand(x, rest[0].shape)
        if m == "permute":
            dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            return b.permute(x, dims)
        if m in ("transpose", "swapaxes", "swapdims"):
            return b.transpose(x, rest[0], rest[1])
        if m == "t":
            return b.mT(x)
        if m == "narrow":
            dim, start, length = rest
            return layout.slice_(x, dim, start, start + length)
        if m == "split":
            return b.split(x, rest[0] if rest else n.kwargs["split_size"], self.arg(n, 2, "dim", 0))
        if m == "chunk":
            return b.chunk(x, rest[0], self.arg(n, 2, "dim", 0))
        if m == "roll":
            return b.roll(x, self.arg(n, 1, "shifts"), self.arg(n, 2, "dims", None))
        if m == "unbind":
            d = self.arg(n, 1, "dim", 0)
            return [layout.select(x, d, i) for i in range(x.shape[d])]
        if m == "unfold":
            return layout.unfold(x, *[int(v) for v in rest[:3]])
        if m == "repeat":
            reps = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            return b.repeat(x, tuple(int(r) for r in reps))
        if m in ("masked_fill", "masked_fill_"):
            return b.masked_fill(x, rest[0], rest[1])
        if m == "copy_":
            return self.copy_(n, x, rest[0])
        if m == "cumsum":
            return self.cumsum(n)
        if m in ("sum", "mean"):
            return self.sum_mean(n, m)
        if m in ("max", "min", "amax", "amin"):
            return self.minmax(n, m.removeprefix("a"), amax=m.startswith("a"))
        if m == "logsumexp":
            return b.logsumexp(x, self.arg(n, 1, "dim"), bool(self.arg(n, 2, "keepdim", False)))
        if m in ("argmax", "argmin"):
            return b.argminmax(x, self.arg(n, 1, "dim"), bool(self.arg(n, 2, "keepdim", False)), m)
        if m in ("softmax", "log_softmax"):
            return b.softmax(x, self.arg(n, 1, "dim"), log=m == "log_softmax")
        if m in ("matmul", "mm", "bmm"):
            return b.matmul(x, rest[0])
        if m in ("zero_", "fill_"):
            raise Unsupported(f"{self.desc(n)}: in-place filling is not supported")
        raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")

    def copy_(self, n: torch.fx.Node, dst: Use, src: Any) -> Use:
        """`attr.copy_(x)` on a plain tensor attribute: later reads of it see x."""
        target = n.args[0]
        if not (isinstance(target, torch.fx.Node) and target.op == "get_attr"):
            raise Unsupported(f"{self.desc(n)}: copy_ into a computed tensor is not supported")
        t: Any = self.gm
        for part in str(target.target).split("."):
            t = getattr(t, part)
        names = {name for name, _ in self.gm.named_buffers()} | {
            name for name, _ in self.gm.named_parameters()
        }
        if str(target.target) in names:
            raise Unsupported(
                f"{self.desc(n)}: an in-place update of {target.target} (module state)"
            )
        value = self.b.contiguous(layout.expand(self.b.tensor(src), dst.shape))
        self.attr_values[self.plain.get(id(t), str(target.target))] = value
        return value

    # -- modules ---------------------------------------------------------------------------------
    def module(self, n: torch.fx.Node, mod: nn.Module) -> Any:
        path = str(n.target)
        b = self.b
        if leaf_rule(mod) is not None:
            call = LeafCall(
                b,
                mod,
                path,
                tuple(self.val(a) for a in n.args),
                {k: self.val(v) for k, v in n.kwargs.items()},
                n.meta.get("val"),
                self.desc(n),
                self.line(n),
            )
            return run_leaf(call)
        self.check_inplace(n, bool(getattr(mod, "inplace", False)))
        x = self.tensor(n) if n.args else None
        t = type(mod)
        if t in self.modules:
            return self.ew_call(n, self.modules[t], mod)
        if isinstance(mod, nn.Identity):
            return x
        assert x is not None
        if isinstance(mod, nn.Flatten):
            return b.flatten(x, mod.start_dim, mod.end_dim)
        if isinstance(mod, nn.Unflatten):
            d = mod.dim % len(x.shape)
            return b.view(x, (*x.shape[:d], *mod.unflattened_size, *x.shape[d + 1 :]))
        if isinstance(mod, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)):
            if mod.training and mod.p > 0:
                raise Unsupported(f"{self.desc(n)}: dropout in training mode is random")
            return x
        if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
            return b.softmax(x, mod.dim, log=isinstance(mod, nn.LogSoftmax))
        if isinstance(mod, nn.Linear):
            return b.linear(x, self.param(path, "weight"), self.param(path, "bias"))
        if isinstance(
            mod,
            (
                nn.Conv1d,
                nn.Conv2d,
                nn.Conv3d,
                nn.ConvTranspose1d,
                nn.ConvTranspose2d,
                nn.ConvTranspose3d,
            ),
        ):
            if getattr(mod, "padding_mode", "zeros") != "zeros":
                raise Unsupported(
                    f"{self.desc(n)}: padding_mode={mod.padding_mode!r} is not supported"
                )
            transposed = isinstance(
                mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
            )
            return b.conv(
                x,
                self.param(path, "weight"),  # type: ignore[arg-type]
                self.param(path, "bias"),
                stride=mod.stride,
                padding=mod.padding,
                dilation=mod.dilation,
                groups=mod.groups,
                transposed=transposed,
                output_padding=getattr(mod, "output_padding", 0),
                out=self.shape(n),
            )
        if isinstance(mod, nn.LayerNorm):
            w = self.param(path, "weight") if mod.elementwise_affine else None
            bias = self.param(path, "bias") if mod.elementwise_affine else None
            return b.layer_norm(x, tuple(mod.normalized_shape), w, bias, float(mod.eps))
        if isinstance(mod, nn.GroupNorm):
            w = self.param(path, "weight") if mod.affine else None
            bias = self.param(path, "bias") if mod.affine else None
            return b.group_norm(x, int(mod.num_groups), w, bias, float(mod.eps))
        if isinstance(
            mod, (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)
        ):
            return self.batch_norm(x, mod, path)
        if isinstance(mod, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
            if mod.return_indices:
                raise Unsupported(f"{self.desc(n)}: max pooling with indices is not supported")
            return b.pool(
                "max_pool",
                x,
                mod.kernel_size,
                mod.stride,
                mod.padding,
                mod.dilation,
                mod.ceil_mode,
                self.shape(n),
            )
        if isinstance(mod, (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
            if not mod.count_include_pad or getattr(mod, "divisor_override", None):
                raise Unsupported(f"{self.desc(n)}: this average pooling variant is not supported")
            return b.pool(
                "avg_pool",
                x,
                mod.kernel_size,
                mod.stride,
                mod.padding,
                1,
                mod.ceil_mode,
                self.shape(n),
            )
        if isinstance(mod, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)):
            return b.adaptive_pool(x, mod.output_size, "avg")
        if isinstance(mod, (nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)):
            if mod.return_indices:
                raise Unsupported(f"{self.desc(n)}: max pooling with indices is not supported")
            return b.adaptive_pool(x, mod.output_size, "max")
        if isinstance(mod, nn.Embedding):
            if mod.max_norm is not None:
                raise Unsupported(f"{self.desc(n)}: embedding with max_norm renormalises weights")
            return b.embedding(self.param(path, "weight"), x)
        if isinstance(
            mod,
            (
                nn.ZeroPad1d,
                nn.ZeroPad2d,
                nn.ZeroPad3d,
                nn.ConstantPad1d,
                nn.ConstantPad2d,
                nn.ConstantPad3d,
            ),
        ):
            return b.pad(x, mod.padding, float(getattr(mod, "value", 0.0)))
        raise Unsupported(f"{self.desc(n)} ({t.__name__}) is not supported by the builtin coder")

    def batch_norm(self, x: Use, mod: nn.Module, path: str) -> Use:
        instance = isinstance(mod, nn.modules.instancenorm._InstanceNorm)
        affine = bool(mod.affine)
        w = self.param(path, "weight") if affine else None
        bias = self.param(path, "bias") if affine else None
        track = bool(mod.track_running_stats)
        batch_stats = bool(mod.training) or not track
        running = None
        if track:
            rm, rv = self.param(path, "running_mean"), self.param(path, "running_var")
            assert rm is not None and rv is not None
            nbt = self.param(path, "num_batches_tracked") if batch_stats else None
            running = (rm, rv, nbt)
        return self.b.batch_norm(
            x,
            w,
            bias,
            running,
            batch_stats=batch_stats,
            momentum=mod.momentum,  # type: ignore[arg-type]
            eps=float(mod.eps),  # type: ignore[arg-type]
            instance=instance,
            module=path,
        )


_FACTORY_VALUES: dict[Any, float] = {
    torch.zeros: 0.0,
    torch.ones: 1.0,
    torch.zeros_like: 0.0,
    torch.ones_like: 1.0,
}
_RANDOM = {torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal}
_RANDOM |= {torch.rand_like, torch.randn_like, torch.randint_like, torch.bernoulli}
_INPLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv}
_INT_OPS: dict[Any, Any] = {
    operator.floordiv: operator.floordiv,
    operator.mod: operator.mod,
    operator.add: operator.add,
    operator.sub: operator.sub,
    operator.mul: operator.mul,
    operator.truediv: operator.truediv,
    operator.pow: operator.pow,
    operator.neg: operator.neg,
    operator.eq: operator.eq,
    operator.ne: operator.ne,
    operator.lt: operator.lt,
    operator.le: operator.le,
    operator.gt: operator.gt,
    operator.ge: operator.ge,
    math.sqrt: math.sqrt,
    int: int,
    float: float,
}
