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
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.fx import _symbolic_trace

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import MinMax, select_op
from stitch_lsp.compiler.catalog import EwOp
from stitch_lsp.compiler.ir import Shape, Unsupported, Use
from stitch_lsp.compiler.recurrent import index_result
from stitch_lsp.compiler.worker.capture_leaves import (
    LeafCall,
    leaf_outputs,
    plain_attributes,
    run_leaf,
)
from stitch_lsp.compiler.worker.converter import Converter, shape_or_none
from stitch_lsp.compiler.worker.lowering import for_function, for_method
from stitch_lsp.compiler.worker.lowerings.nn import nothing_to_drop
from stitch_lsp.compiler.worker.spelling import leaf_rule, tables

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


class FxConverter(Converter):
    def __init__(self, gm: torch.fx.GraphModule, inputs: list[Any], path: str | None) -> None:
        super().__init__(gm, path)
        self.inputs = inputs
        self.attr_values: dict[str, Use] = {}  # plain tensor attributes overwritten by copy_
        self.registered = {name for name, _ in gm.named_parameters()}
        self.registered |= {name for name, _ in gm.named_buffers()}
        self.plain = {id(t): name for name, t in plain_attributes(gm).items()}
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self.functions, self.methods, self.modules, _ = tables()

    # -- node facts ------------------------------------------------------------------------------
    def what(self, node: torch.fx.Node) -> str:
        if node.op == "call_module":
            return display_path(str(node.target))
        if node.op == "call_method":
            return f".{node.target}()"
        if node.op in ("placeholder", "output", "get_attr"):
            return str(node.target)
        return str(getattr(node.target, "__name__", str(node.target)))

    def spelled(self, n: torch.fx.Node) -> str:
        if n.op == "call_method":
            return str(n.target)
        return str(getattr(n.target, "__name__", n.target))

    def shape(self, node: torch.fx.Node) -> Shape:
        s = shape_or_none(node)
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

    def out_shape(self, n: torch.fx.Node) -> Shape:
        return self.shape(n)

    def state_leaf(self, n: torch.fx.Node, name: str) -> Use:
        owner, _, last = name.rpartition(".")
        leaf = self.param(owner, last)
        if leaf is None:
            raise Unsupported(f"{self.desc(n)}: batch norm without num_batches_tracked")
        return leaf

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
        if value.dtype not in (torch.float32, torch.int64, torch.bool):
            raise Unsupported(
                f"input `{n.target}` is {value.dtype}; the builtin coder handles float32, "
                "int64 and bool inputs here"
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
        lowering = for_function(f)
        if lowering is None:
            raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")
        return lowering(self, n)

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

    # -- tensor methods --------------------------------------------------------------------------
    def method(self, n: torch.fx.Node) -> Any:
        m = str(n.target)
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
        self.tensor(n)
        if m in ("zero_", "fill_"):
            raise Unsupported(f"{self.desc(n)}: in-place filling is not supported")
        lowering = for_method(m)
        if lowering is None:
            raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")
        return lowering(self, n)

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
                self.label(n),
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
            kind = type(mod).__name__.lower()
            if mod.training and mod.p > 0 and not nothing_to_drop(self.b.g, x, kind):
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
            if getattr(mod, "divisor_override", None):
                raise Unsupported(f"{self.desc(n)}: average pooling with divisor_override")
            return b.pool(
                "avg_pool",
                x,
                mod.kernel_size,
                mod.stride,
                mod.padding,
                1,
                mod.ceil_mode,
                self.shape(n),
                include_pad=bool(mod.count_include_pad),
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
