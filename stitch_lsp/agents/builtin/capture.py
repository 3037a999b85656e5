"""Capture a KernelBench reference as an IR graph, with real shapes and no real memory.

torch.fx traces `Model(*get_init_inputs())`; the model and its inputs are built on the meta
device, so capturing a problem that needs tens of GB costs nothing. Module calls, functions and
tensor methods that mean the same op are normalised to one IR op here; normalisations, softmax
and friends are decomposed into reductions plus elementwise math, computed the way ATen does.
"""

from __future__ import annotations

import importlib.util
import math
import operator
import re
import sys
import types
from pathlib import Path
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from stitch_lsp.agents.builtin.ir import Const, Graph, Operand, Shape, Unsupported, Use
from stitch_lsp.agents.builtin.recurrent import index_result
from stitch_lsp.agents.builtin.recurrent_capture import capture_factory, capture_recurrent

_LINE = re.compile(r'File "[^"]*", line (\d+), in forward')


def load_problem(path: Path) -> types.ModuleType:
    """Execute a problem file as a fresh module (it defines Model, get_inputs, get_init_inputs)."""
    name = f"stitch_reference_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Unsupported(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise Unsupported(f"importing the reference failed: {type(exc).__name__}: {exc}") from exc
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise Unsupported(f"the reference defines no `{attr}` (KernelBench format expected)")
    return module


class _Tracer(torch.fx.Tracer):
    record_stack_traces = True


def trace_problem(path: Path) -> tuple[torch.fx.GraphModule, list[Any]]:
    """Trace Model on the meta device and attach shapes to every node."""
    mod = load_problem(path)
    with torch.device("meta"):
        try:
            model = mod.Model(*mod.get_init_inputs())
            inputs = list(mod.get_inputs())
        except Exception as exc:
            raise Unsupported(
                f"building the model on the meta device failed: {type(exc).__name__}: {exc}"
            ) from exc
    defaulted = _defaulted_args(model, len(inputs))
    try:
        graph = _Tracer().trace(model, concrete_args=defaulted)
        gm = torch.fx.GraphModule(model, graph)
        gm.meta["stitch_defaulted"] = defaulted or {}
    except Exception as exc:
        raise Unsupported(f"torch.fx could not trace forward: {type(exc).__name__}: {exc}") from exc
    try:
        ShapeProp(gm).propagate(*inputs)
    except Exception as exc:
        raise Unsupported(f"shape propagation failed: {type(exc).__name__}: {exc}") from exc
    return gm, inputs


def _defaulted_args(model: nn.Module, given: int) -> dict[str, Any] | None:
    """forward's parameters that get_inputs() does not fill, at their defaults (`h0=None`), so
    `if h0 is None:` takes the branch the reference really runs."""
    import inspect

    params = list(inspect.signature(model.forward).parameters.values())[given:]
    return {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    } or None


def capture(path: Path) -> Graph:
    gm, inputs = trace_problem(path)
    return _Converter(gm, inputs).run()


def _shape(node: torch.fx.Node) -> Shape:
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        raise Unsupported(f"no tensor shape for {node.format_node()}")
    if tm.dtype != torch.float32:
        raise Unsupported(f"{_desc(node)} produces {tm.dtype}; the builtin coder handles float32")
    return tuple(int(d) for d in tm.shape)


def _line(node: torch.fx.Node) -> int | None:
    found = _LINE.findall(node.meta.get("stack_trace") or "")
    return int(found[-1]) if found else None


def _desc(node: torch.fx.Node) -> str:
    if node.op == "call_module":
        what = f"self.{node.target}"
    elif node.op == "call_method":
        what = f".{node.target}()"
    else:
        what = getattr(node.target, "__name__", str(node.target))
    line = _line(node)
    return f"{what} (line {line})" if line else what


def _attr_expr(path: str) -> str:
    """`layers.0.weight` -> `self.layers[0].weight` (Sequential children are indexed)."""
    return "self" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in path.split("."))


def _fold(fn: str, a: float, b: float) -> float:
    ops = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "pow": operator.pow,
        "maximum": max,
        "minimum": min,
    }
    return float(ops[fn](a, b))


def _dims(dim: Any, rank: int) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(rank))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted({d % rank for d in dim}))


def _keep(shape: Shape, axes: tuple[int, ...]) -> Shape:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _drop(shape: Shape, axes: tuple[int, ...]) -> Shape:
    return tuple(d for i, d in enumerate(shape) if i not in axes)


_UNARY_FUNCS: dict[Any, str] = {
    torch.relu: "relu",
    F.relu: "relu",
    F.relu6: "relu6",
    torch.sigmoid: "sigmoid",
    F.sigmoid: "sigmoid",
    torch.tanh: "tanh",
    F.tanh: "tanh",
    F.silu: "silu",
    F.mish: "mish",
    F.hardswish: "hardswish",
    F.hardsigmoid: "hardsigmoid",
    F.selu: "selu",
    torch.selu: "selu",
    torch.exp: "exp",
    torch.log: "log",
    torch.log1p: "log1p",
    torch.sqrt: "sqrt",
    torch.rsqrt: "rsqrt",
    torch.abs: "abs",
    torch.neg: "neg",
    torch.square: "square",
    torch.reciprocal: "reciprocal",
    operator.neg: "neg",
}
_UNARY_METHODS = {
    "relu": "relu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "exp": "exp",
    "log": "log",
    "log1p": "log1p",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "abs": "abs",
    "neg": "neg",
    "square": "square",
    "reciprocal": "reciprocal",
}
_UNARY_MODULES: dict[type, str] = {
    nn.ReLU: "relu",
    nn.ReLU6: "relu6",
    nn.Sigmoid: "sigmoid",
    nn.Tanh: "tanh",
    nn.SiLU: "silu",
    nn.Mish: "mish",
    nn.Hardswish: "hardswish",
    nn.Hardsigmoid: "hardsigmoid",
    nn.SELU: "selu",
}
_BINARY: dict[Any, str] = {
    operator.add: "add",
    torch.add: "add",
    operator.sub: "sub",
    torch.sub: "sub",
    torch.subtract: "sub",
    operator.mul: "mul",
    torch.mul: "mul",
    torch.multiply: "mul",
    operator.truediv: "div",
    torch.div: "div",
    torch.true_divide: "div",
    torch.divide: "div",
    torch.maximum: "maximum",
    torch.minimum: "minimum",
    operator.pow: "pow",
    torch.pow: "pow",
}
_BINARY_METHODS = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "div": "div",
    "multiply": "mul",
    "divide": "div",
    "pow": "pow",
    "maximum": "maximum",
    "minimum": "minimum",
}
_IDENTITY_METHODS = {"contiguous", "clone", "detach", "view", "reshape", "flatten", "squeeze"}
_IDENTITY_METHODS |= {"unsqueeze", "view_as", "reshape_as", "float", "expand_as"}
_IDENTITY_FUNCS: set[Any] = {torch.flatten, torch.reshape, torch.squeeze, torch.unsqueeze}
_IDENTITY_FUNCS |= {torch.clone, torch.detach}


class _Converter:
    def __init__(self, gm: torch.fx.GraphModule, inputs: list[Any]) -> None:
        self.gm = gm
        self.inputs = inputs
        self.g = Graph()
        self.env: dict[torch.fx.Node, Any] = {}
        self.node: torch.fx.Node | None = None
        self.int_vids: set[int] = set()  # int64 results (argmax): only returned

    # -- helpers -----------------------------------------------------------------------------
    def run(self) -> Graph:
        self.g.defaulted = dict(self.gm.meta.get("stitch_defaulted", {}))
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "output":
                self._output(node.args[0])
                continue
            self.env[node] = self._convert(node)
        return self.g

    def _output(self, out: Any) -> None:
        items = out if isinstance(out, (tuple, list)) else (out,)
        for item in items:
            val = self.env.get(item) if isinstance(item, torch.fx.Node) else None
            if not isinstance(val, Use):
                raise Unsupported("forward must return a tensor or a tuple of tensors")
            if val.trans:
                raise Unsupported("forward returns a transposed tensor")
            self.g.outputs.append(val)

    def _val(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (tuple, list)):
            return type(a)(self._val(x) for x in a)
        return a

    def _operand(self, a: Any) -> Operand:
        v = self._val(a)
        if isinstance(v, Use):
            return self._plain(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unsupported(f"{self._here()}: operand {v!r} is not a tensor or a number")
        return Const(float(v))

    def _plain(self, u: Use) -> Use:
        if u.vid in self.int_vids:
            raise Unsupported(f"{self._here()}: math on an argmax/argmin result is not supported")
        if u.trans:
            raise Unsupported(
                f"{self._here()}: a transposed tensor is only supported as a GEMM operand"
            )
        return u

    def _here(self) -> str:
        return _desc(self.node) if self.node is not None else "?"

    def _use(self, a: Any) -> Use:
        v = self._operand(a)
        if not isinstance(v, Use):
            raise Unsupported(f"{self._here()}: expected a tensor, got a number")
        return v

    def _ew(self, fn: str, args: list[Operand], shape: Shape | None = None, **params: Any) -> Use:
        n = self.node
        assert n is not None
        out_shape = shape if shape is not None else _shape(n)
        node = self.g.add("ew", fn, args, out_shape, _desc(n), _line(n), **params)
        return Use(node.vid, out_shape)

    def _reduce(self, kind: str, field: str, x: Use, axes: tuple[int, ...]) -> Use:
        n = self.node
        assert n is not None
        shape = _keep(x.shape, axes)
        node = self.g.add("reduce", kind, [x], shape, _desc(n), _line(n), axes=axes, field=field)
        return Use(node.vid, shape)

    def _arg(self, node: torch.fx.Node, i: int, name: str, default: Any = None) -> Any:
        if len(node.args) > i:
            return self._val(node.args[i])
        return self._val(node.kwargs.get(name, default))

    def _leaf(self, expr: str, t: torch.Tensor, kind: str = "param") -> Use:
        if t.dtype != torch.float32 and kind != "buffer":
            raise Unsupported(f"{expr} is {t.dtype}; the builtin coder handles float32")
        leaf = self.g.add_leaf(kind, expr, tuple(t.shape), str(t.dtype).removeprefix("torch."))  # type: ignore[arg-type]
        return Use(leaf.vid, leaf.shape)

    def _param(self, module_path: str, name: str) -> Use | None:
        mod = self.gm.get_submodule(module_path)
        t = getattr(mod, name, None)
        if t is None:
            return None
        key = _attr_expr(f"{module_path}.{name}" if module_path else name)
        for leaf in self.g.leaves.values():
            if leaf.expr == key:
                return Use(leaf.vid, leaf.shape)
        return self._leaf(key, t, "param" if isinstance(t, nn.Parameter) else "buffer")

    # -- dispatch ----------------------------------------------------------------------------
    def _convert(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            return self._placeholder(n)
        if n.op == "get_attr":
            t = self.gm
            for part in str(n.target).split("."):
                t = getattr(t, part)
            if not isinstance(t, torch.Tensor):
                return t
            expr = _attr_expr(str(n.target))
            existing = [lf for lf in self.g.leaves.values() if lf.expr == expr]
            if existing:
                return Use(existing[0].vid, existing[0].shape)
            return self._leaf(expr, t, "param" if isinstance(t, nn.Parameter) else "buffer")
        if n.op == "call_module":
            return self._module(n, self.gm.get_submodule(str(n.target)))
        if n.op == "call_method":
            return self._method(n)
        if n.op == "call_function":
            return self._function(n)
        raise Unsupported(f"unexpected graph node {n.op}")

    def _placeholder(self, n: torch.fx.Node) -> Any:
        idx = len(self.g.input_names)
        if idx >= len(self.inputs) and n.args:
            return n.args[0]  # a parameter left at its default (see _defaulted_args)
        self.g.input_names.append(str(n.target))
        value = self.inputs[idx] if idx < len(self.inputs) else None
        if not isinstance(value, torch.Tensor):
            raise Unsupported(
                f"forward input `{n.target}` is not a tensor ({type(value).__name__})"
            )
        if value.dtype != torch.float32:
            raise Unsupported(
                f"input `{n.target}` is {value.dtype}; the builtin coder handles float32"
            )
        leaf = self.g.add_leaf("input", str(n.target), tuple(value.shape))
        return Use(leaf.vid, leaf.shape)

    def _function(self, n: torch.fx.Node) -> Any:
        f = n.target
        self._check_inplace(n, bool(n.kwargs.get("inplace", False)))
        if f is operator.getitem:
            base = self._val(n.args[0])
            idx = n.args[1]
            if isinstance(base, tuple) and len(base) == 2 and base[0] == "reduce_pair":
                if idx == 0:
                    return base[1]
                raise Unsupported(f"{_desc(n)}: the indices of max/min are not supported")
            if isinstance(base, (tuple, list, torch.Size)):
                return base[idx]
            picked = index_result(self.g, base, idx) if isinstance(base, Use) else None
            if picked is not None:
                return picked
            raise Unsupported(f"{_desc(n)}: indexing a tensor is not supported")
        if f is getattr:
            base = self._val(n.args[0])
            attr = n.args[1]
            if isinstance(base, Use):
                if attr == "shape":
                    return tuple(base.shape)
                if attr in ("T", "mT"):
                    return self._transpose(base)
                if attr == "ndim":
                    return len(base.shape)
                if attr == "device":
                    return "device"  # every value lives on the inputs' device
            raise Unsupported(f"{_desc(n)}: attribute {attr!r} is not supported")
        if f is torch.fx._symbolic_trace._assert_is_none:
            return None
        made = capture_factory(self, n)
        if made is not None:
            return made
        if f in _UNARY_FUNCS:
            return self._ew(_UNARY_FUNCS[f], [self._operand(n.args[0])])
        if f in _BINARY:
            return self._binary(n, _BINARY[f])
        if f in _IDENTITY_FUNCS:
            return Use(self._use(n.args[0]).vid, _shape(n))
        if f in (torch.max, torch.min, torch.amax, torch.amin):
            return self._minmax(n, "max" if f in (torch.max, torch.amax) else "min", f)
        if f in (torch.argmax, torch.argmin):
            return self._argminmax(n, "argmax" if f is torch.argmax else "argmin")
        if f in (torch.clamp, torch.clip):
            return self._clamp(n, self._arg(n, 1, "min"), self._arg(n, 2, "max"))
        if f is F.hardtanh:
            lo, hi = self._arg(n, 1, "min_val", -1.0), self._arg(n, 2, "max_val", 1.0)
            return self._ew("hardtanh", [self._operand(n.args[0])], lo=float(lo), hi=float(hi))
        if f is F.leaky_relu:
            slope = self._arg(n, 1, "negative_slope", 0.01)
            return self._ew("leaky_relu", [self._operand(n.args[0])], slope=float(slope))
        if f is F.elu:
            alpha = self._arg(n, 1, "alpha", 1.0)
            return self._ew("elu", [self._operand(n.args[0])], alpha=float(alpha))
        if f is F.gelu:
            approx = self._arg(n, 1, "approximate", "none")
            return self._ew("gelu_tanh" if approx == "tanh" else "gelu", [self._operand(n.args[0])])
        if f is F.softplus:
            beta, thr = self._arg(n, 1, "beta", 1.0), self._arg(n, 2, "threshold", 20.0)
            return self._ew(
                "softplus", [self._operand(n.args[0])], beta=float(beta), threshold=float(thr)
            )
        if f in (torch.sum, torch.mean):
            return self._sum_mean(n, "sum" if f is torch.sum else "mean")
        if f is torch.logsumexp:
            return self._logsumexp(n)
        if f in (torch.softmax, F.softmax):
            return self._softmax(self._use(n.args[0]), self._arg(n, 1, "dim"), log=False)
        if f in (torch.log_softmax, F.log_softmax):
            return self._softmax(self._use(n.args[0]), self._arg(n, 1, "dim"), log=True)
        if f in (F.max_pool1d, F.max_pool2d, F.max_pool3d):
            k = self._arg(n, 1, "kernel_size")
            if self._arg(n, 6, "return_indices", False):
                raise Unsupported(f"{_desc(n)}: max pooling with indices is not supported")
            return self._pool(
                n,
                self._use(n.args[0]),
                "max_pool",
                k,
                self._arg(n, 2, "stride"),
                self._arg(n, 3, "padding", 0),
                self._arg(n, 4, "dilation", 1),
                bool(self._arg(n, 5, "ceil_mode", False)),
            )
        if f in (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d):
            if not self._arg(n, 5, "count_include_pad", True) or self._arg(
                n, 6, "divisor_override"
            ):
                raise Unsupported(f"{_desc(n)}: this average pooling variant is not supported")
            return self._pool(
                n,
                self._use(n.args[0]),
                "avg_pool",
                self._arg(n, 1, "kernel_size"),
                self._arg(n, 2, "stride"),
                self._arg(n, 3, "padding", 0),
                1,
                bool(self._arg(n, 4, "ceil_mode", False)),
            )
        if f in (F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d):
            return self._global_avg(n, self._use(n.args[0]), self._arg(n, 1, "output_size"))
        if f in (torch.matmul, operator.matmul, torch.mm, torch.bmm):
            return self._matmul(self._val(n.args[0]), self._val(n.args[1]))
        if f is F.linear:
            return self._linear(self._use(n.args[0]), self._val(n.args[1]), self._arg(n, 2, "bias"))
        if f is torch.addmm:
            beta, alpha = n.kwargs.get("beta", 1), n.kwargs.get("alpha", 1)
            if beta != 1 or alpha != 1:
                raise Unsupported(f"{_desc(n)}: addmm with alpha/beta is not supported")
            out = self._matmul(self._val(n.args[1]), self._val(n.args[2]))
            return self._ew("add", [out, self._use(n.args[0])])
        if f is torch.transpose:
            return self._transpose_dims(self._val(n.args[0]), n.args[1], n.args[2])
        if f is torch.t:
            return self._transpose(self._val(n.args[0]))
        if f is F.layer_norm:
            shape = self._arg(n, 1, "normalized_shape")
            w, b, eps = (
                self._arg(n, 2, "weight"),
                self._arg(n, 3, "bias"),
                self._arg(n, 4, "eps", 1e-5),
            )
            return self._layer_norm(self._use(n.args[0]), tuple(shape), w, b, float(eps))
        if f is F.group_norm:
            groups = self._arg(n, 1, "num_groups")
            w, b, eps = (
                self._arg(n, 2, "weight"),
                self._arg(n, 3, "bias"),
                self._arg(n, 4, "eps", 1e-5),
            )
            return self._group_norm(self._use(n.args[0]), int(groups), w, b, float(eps))
        if f is F.dropout:
            if self._arg(n, 2, "training", True) and float(self._arg(n, 1, "p", 0.5)) > 0:
                raise Unsupported(f"{_desc(n)}: dropout in training mode is random")
            return self._use(n.args[0])
        raise Unsupported(f"{_desc(n)} is not supported by the builtin coder")

    def _method(self, n: torch.fx.Node) -> Any:
        m = str(n.target)
        if m == "size":
            base = self._use(n.args[0])
            dim = self._arg(n, 1, "dim")
            return tuple(base.shape) if dim is None else base.shape[dim]
        if m == "dim":
            return len(self._use(n.args[0]).shape)
        if m in _IDENTITY_METHODS:
            if m == "float":
                pass
            return Use(self._use(n.args[0]).vid, _shape(n))
        if m in _UNARY_METHODS:
            return self._ew(_UNARY_METHODS[m], [self._operand(n.args[0])])
        if m in _BINARY_METHODS:
            return self._binary(n, _BINARY_METHODS[m])
        if m in ("clamp", "clip"):
            return self._clamp(n, self._arg(n, 1, "min"), self._arg(n, 2, "max"))
        if m in ("sum", "mean"):
            return self._sum_mean(n, m)
        if m in ("max", "min", "amax", "amin"):
            return self._minmax(n, m.removeprefix("a"), None)
        if m == "logsumexp":
            return self._logsumexp(n)
        if m in ("argmax", "argmin"):
            return self._argminmax(n, m)
        if m in ("softmax", "log_softmax"):
            return self._softmax(
                self._use(n.args[0]), self._arg(n, 1, "dim"), log=m == "log_softmax"
            )
        if m == "t":
            return self._transpose(self._val(n.args[0]))
        if m == "transpose":
            return self._transpose_dims(self._val(n.args[0]), n.args[1], n.args[2])
        if m == "permute":
            base = self._val(n.args[0])
            dims = n.args[1] if isinstance(n.args[1], (tuple, list)) else n.args[1:]
            rank = len(base.shape)
            dims = [d % rank for d in dims]
            swapped = list(range(rank))
            if rank >= 2:
                swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
            if dims == list(range(rank)):
                return base
            if dims == swapped:
                return self._transpose(base)
            raise Unsupported(f"{_desc(n)}: general permutes are not supported")
        raise Unsupported(f"{_desc(n)} is not supported by the builtin coder")

    def _check_inplace(self, n: torch.fx.Node, inplace: bool) -> None:
        """An in-place op is computed out of place: fine unless its input is read again."""
        src = n.args[0] if n.args else None
        if inplace and isinstance(src, torch.fx.Node) and len(src.users) > 1:
            raise Unsupported(f"{_desc(n)}: an in-place op whose input is used again")

    def _module(self, n: torch.fx.Node, mod: nn.Module) -> Any:
        path = str(n.target)
        self._check_inplace(n, bool(getattr(mod, "inplace", False)))
        x = self._use(n.args[0]) if n.args else None
        t = type(mod)
        if t in _UNARY_MODULES:
            return self._ew(_UNARY_MODULES[t], [x])
        if isinstance(mod, nn.Identity):
            return x
        if isinstance(mod, nn.Flatten):
            return Use(x.vid, _shape(n))
        if isinstance(mod, nn.Dropout):
            if mod.training and mod.p > 0:
                raise Unsupported(f"{_desc(n)}: dropout in training mode is random")
            return x
        if isinstance(mod, nn.LeakyReLU):
            return self._ew("leaky_relu", [x], slope=float(mod.negative_slope))
        if isinstance(mod, nn.ELU):
            return self._ew("elu", [x], alpha=float(mod.alpha))
        if isinstance(mod, nn.Hardtanh):  # also ReLU6's base class, handled above
            return self._ew("hardtanh", [x], lo=float(mod.min_val), hi=float(mod.max_val))
        if isinstance(mod, nn.GELU):
            return self._ew("gelu_tanh" if mod.approximate == "tanh" else "gelu", [x])
        if isinstance(mod, nn.Softplus):
            return self._ew("softplus", [x], beta=float(mod.beta), threshold=float(mod.threshold))
        if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
            return self._softmax(x, mod.dim, log=isinstance(mod, nn.LogSoftmax))
        if isinstance(mod, nn.Linear):
            return self._linear(x, self._param(path, "weight"), self._param(path, "bias"))
        if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            return self._conv(n, mod, path, x, transposed=False)
        if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)):
            return self._conv(n, mod, path, x, transposed=True)
        if isinstance(mod, nn.LayerNorm):
            w = self._param(path, "weight") if mod.elementwise_affine else None
            b = self._param(path, "bias") if mod.elementwise_affine else None
            return self._layer_norm(x, tuple(mod.normalized_shape), w, b, float(mod.eps))
        if isinstance(mod, nn.GroupNorm):
            w = self._param(path, "weight") if mod.affine else None
            b = self._param(path, "bias") if mod.affine else None
            return self._group_norm(x, int(mod.num_groups), w, b, float(mod.eps))
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            return self._batch_norm(x, mod, path, instance=False)
        if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
            return self._batch_norm(x, mod, path, instance=True)
        if isinstance(mod, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
            if mod.return_indices:
                raise Unsupported(f"{_desc(n)}: max pooling with indices is not supported")
            return self._pool(
                n,
                x,
                "max_pool",
                mod.kernel_size,
                mod.stride,
                mod.padding,
                mod.dilation,
                mod.ceil_mode,
            )
        if isinstance(mod, (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
            if not mod.count_include_pad or getattr(mod, "divisor_override", None):
                raise Unsupported(f"{_desc(n)}: this average pooling variant is not supported")
            return self._pool(
                n, x, "avg_pool", mod.kernel_size, mod.stride, mod.padding, 1, mod.ceil_mode
            )
        if isinstance(mod, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)):
            return self._global_avg(n, x, mod.output_size)
        found = capture_recurrent(self, n, mod, path)
        if found is not None:
            return found
        raise Unsupported(f"{_desc(n)} ({t.__name__}) is not supported by the builtin coder")

    # -- op families ---------------------------------------------------------------------------
    def _binary(self, n: torch.fx.Node, fn: str) -> Any:
        a, b = (
            self._operand(n.args[0]),
            self._operand(n.args[1] if len(n.args) > 1 else n.kwargs["other"]),
        )
        if n.kwargs.get("rounding_mode") is not None:
            raise Unsupported(f"{_desc(n)}: division with rounding_mode is not supported")
        alpha = n.kwargs.get("alpha", 1)
        if fn in ("add", "sub") and alpha != 1:
            shape_b = b.shape if isinstance(b, Use) else ()
            b = self._ew("mul", [b, Const(float(alpha))], shape=shape_b)
        if isinstance(a, Const) and isinstance(b, Const):
            return _fold(fn, a.value, b.value)  # Python arithmetic traced as a node
        if fn == "pow" and isinstance(b, Const) and b.value == 2.0:
            return self._ew("square", [a])
        if fn == "pow" and isinstance(b, Const) and b.value == 0.5:
            return self._ew("sqrt", [a])
        return self._ew(fn, [a, b])

    def _clamp(self, n: torch.fx.Node, lo: Any, hi: Any) -> Use:
        x = self._operand(n.args[0])
        if isinstance(lo, Use) or isinstance(hi, Use):
            raise Unsupported(f"{_desc(n)}: clamp with tensor bounds is not supported")
        if lo is None and hi is None:
            raise Unsupported(f"{_desc(n)}: clamp without bounds")
        params: dict[str, Any] = {}
        if lo is not None:
            params["lo"] = float(lo)
        if hi is not None:
            params["hi"] = float(hi)
        return self._ew("clamp", [x], **params)

    def _minmax(self, n: torch.fx.Node, kind: str, f: Any) -> Any:
        x = self._use(n.args[0])
        other = self._arg(n, 1, "dim")
        if isinstance(other, Use):
            return self._ew("maximum" if kind == "max" else "minimum", [x, other])
        keepdim = bool(self._arg(n, 2, "keepdim", False))
        amax = f in (torch.amax, torch.amin) or str(n.target) in ("amax", "amin")
        axes = _dims(other, len(x.shape))
        r = self._reduce(kind, kind, x, axes)
        out = r if keepdim else Use(r.vid, _drop(x.shape, axes))
        if other is None or amax:
            return out
        return ("reduce_pair", out)  # (values, indices): only [0] is supported

    def _argminmax(self, n: torch.fx.Node, kind: str) -> Use:
        x = self._use(n.args[0])
        dim = self._arg(n, 1, "dim")
        keepdim = bool(self._arg(n, 2, "keepdim", False))
        if dim is None:
            x = Use(x.vid, (math.prod(x.shape),))
            dim = 0
        axes = _dims(dim, len(x.shape))
        shape = _keep(x.shape, axes)
        node = self.g.add(
            "reduce",
            kind,
            [x],
            shape,
            _desc(n),
            _line(n),
            axes=axes,
            field="index",
            dtype="int64",
        )
        self.int_vids.add(node.vid)
        if keepdim and self._arg(n, 1, "dim") is not None:
            return Use(node.vid, shape)
        return Use(node.vid, tuple(int(d) for d in n.meta["tensor_meta"].shape))

    def _sum_mean(self, n: torch.fx.Node, kind: str) -> Use:
        x = self._use(n.args[0])
        if n.kwargs.get("dtype") is not None:
            raise Unsupported(f"{_desc(n)}: reductions with a dtype are not supported")
        axes = _dims(self._arg(n, 1, "dim"), len(x.shape))
        keepdim = bool(self._arg(n, 2, "keepdim", False))
        r = self._reduce("sum", "sum", x, axes)
        if kind == "mean":
            count = math.prod(x.shape[a] for a in axes)
            r = self._ew("mul", [r, Const(1.0 / count)], shape=r.shape)
        return r if keepdim else Use(r.vid, _drop(x.shape, axes))

    def _logsumexp(self, n: torch.fx.Node) -> Use:
        x = self._use(n.args[0])
        axes = _dims(self._arg(n, 1, "dim"), len(x.shape))
        keepdim = bool(self._arg(n, 2, "keepdim", False))
        mx = self._reduce("softmax", "max", x, axes)
        se = self._reduce("softmax", "sumexp", x, axes)
        r = self._ew("lse_finish", [mx, se], shape=mx.shape)
        return r if keepdim else Use(r.vid, _drop(x.shape, axes))

    def _softmax(self, x: Use, dim: Any, log: bool) -> Use:
        if dim is None:
            raise Unsupported(f"{self._here()}: softmax without dim is not supported")
        axes = _dims(dim, len(x.shape))
        mx = self._reduce("softmax", "max", x, axes)
        se = self._reduce("softmax", "sumexp", x, axes)
        shifted = self._ew("sub", [x, mx], shape=x.shape)
        if log:
            return self._ew("sub", [shifted, self._ew("log", [se], shape=se.shape)], shape=x.shape)
        return self._ew("div", [self._ew("exp", [shifted], shape=x.shape), se], shape=x.shape)

    def _global_avg(self, n: torch.fx.Node, x: Use, size: Any) -> Use:
        sizes = size if isinstance(size, (tuple, list)) else (size,)
        if any(s not in (1, None) for s in sizes):
            raise Unsupported(f"{_desc(n)}: adaptive pooling is only supported to size 1")
        spatial = len(_shape(n)) - 2 if len(x.shape) > 2 else len(x.shape) - 1
        axes = tuple(range(len(x.shape) - spatial, len(x.shape)))
        r = self._reduce("sum", "sum", x, axes)
        count = math.prod(x.shape[a] for a in axes)
        return self._ew("mul", [r, Const(1.0 / count)], shape=_shape(n))

    def _normalize(self, x: Use, axes: tuple[int, ...], eps: float) -> tuple[Use, Use, Use]:
        mean = self._reduce("moments", "mean", x, axes)
        var = self._reduce("moments", "var", x, axes)
        y = self._normalize_with(x, mean, var, eps)
        return y, mean, var

    def _normalize_with(self, x: Use, mean: Use, var: Use, eps: float) -> Use:
        rstd = self._ew(
            "rsqrt", [self._ew("add", [var, Const(eps)], shape=var.shape)], shape=var.shape
        )
        centred = self._ew("sub", [x, mean], shape=x.shape)
        return self._ew("mul", [centred, rstd], shape=x.shape)

    def _affine(self, y: Use, w: Any, b: Any, channel_shape: Shape) -> Use:
        if isinstance(w, Use):
            y = self._ew("mul", [y, Use(w.vid, channel_shape)], shape=y.shape)
        if isinstance(b, Use):
            y = self._ew("add", [y, Use(b.vid, channel_shape)], shape=y.shape)
        return y

    def _layer_norm(self, x: Use, norm_shape: Shape, w: Any, b: Any, eps: float) -> Use:
        k = len(norm_shape)
        if tuple(x.shape[-k:]) != tuple(norm_shape):
            raise Unsupported(
                f"{self._here()}: layer_norm shape {norm_shape} does not match {x.shape}"
            )
        axes = tuple(range(len(x.shape) - k, len(x.shape)))
        y, _, _ = self._normalize(x, axes, eps)
        return self._affine(y, w, b, tuple(norm_shape))

    def _group_norm(self, x: Use, groups: int, w: Any, b: Any, eps: float) -> Use:
        n_, c = x.shape[0], x.shape[1]
        rest = x.shape[2:]
        if c % groups:
            raise Unsupported(f"{self._here()}: {c} channels do not split into {groups} groups")
        grouped = Use(x.vid, (n_, groups, (c // groups) * math.prod(rest)))
        y, _, _ = self._normalize(grouped, (2,), eps)
        y = Use(y.vid, x.shape)
        return self._affine(y, w, b, (c,) + (1,) * len(rest))

    def _batch_norm(self, x: Use, mod: nn.Module, path: str, instance: bool) -> Use:
        c = x.shape[1]
        rest = x.shape[2:]
        channel_shape = (c,) + (1,) * len(rest)
        affine = bool(mod.affine)
        w = self._param(path, "weight") if affine else None
        b = self._param(path, "bias") if affine else None
        eps = float(mod.eps)
        use_batch_stats = mod.training or not mod.track_running_stats
        if not use_batch_stats:
            rm = self._param(path, "running_mean")
            rv = self._param(path, "running_var")
            assert rm is not None and rv is not None
            if instance:
                rm, rv = Use(rm.vid, (c,) + (1,) * len(rest)), Use(rv.vid, channel_shape)
            y = self._normalize_with(x, Use(rm.vid, channel_shape), Use(rv.vid, channel_shape), eps)
            return self._affine(y, w, b, channel_shape)
        axes = tuple(range(2, len(x.shape))) if instance else (0, *range(2, len(x.shape)))
        if instance and not rest:
            raise Unsupported(f"{self._here()}: instance norm needs spatial dims")
        y, mean, var = self._normalize(x, axes, eps)
        if mod.track_running_stats and mod.training:
            if instance:
                raise Unsupported(f"{self._here()}: instance norm that tracks running stats")
            count = math.prod(x.shape[a] for a in axes)
            rm, rv, nbt = (
                self._param(path, "running_mean"),
                self._param(path, "running_var"),
                self._param(path, "num_batches_tracked"),
            )
            n = self.node
            assert n is not None and rm is not None and rv is not None and nbt is not None
            self.g.add(
                "bn_update",
                "bn_update",
                [mean, var, rm, rv, nbt],
                mean.shape,
                _desc(n),
                _line(n),
                momentum=None if mod.momentum is None else float(mod.momentum),
                count=count,
                module=_attr_expr(path),
            )
        return self._affine(y, w, b, channel_shape)

    def _pool(
        self, n: torch.fx.Node, x: Use, fn: str, k: Any, s: Any, p: Any, d: Any, ceil: bool
    ) -> Use:
        nd = len(x.shape) - 2
        if nd < 1 or ceil:
            raise Unsupported(f"{_desc(n)}: pooling with ceil_mode is not supported")

        def tup(v: Any) -> tuple[int, ...]:
            return tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),) * nd

        out = _shape(n)
        stride = tup(s if s not in (None, ()) else k)
        node = self.g.add(
            "pool",
            fn,
            [x],
            out,
            _desc(n),
            _line(n),
            kernel=tup(k),
            stride=stride,
            padding=tup(p),
            dilation=tup(d),
        )
        return Use(node.vid, out)

    # -- heavy ops -------------------------------------------------------------------------------
    def _transpose(self, u: Any) -> Use:
        if not isinstance(u, Use) or len(u.shape) < 2:
            raise Unsupported(f"{self._here()}: transpose of a non-matrix")
        s = u.shape
        return Use(u.vid, (*s[:-2], s[-1], s[-2]), not u.trans)

    def _transpose_dims(self, u: Any, d0: int, d1: int) -> Use:
        rank = len(u.shape)
        if {d0 % rank, d1 % rank} != {rank - 1, rank - 2}:
            raise Unsupported(f"{self._here()}: only the last two dims may be transposed")
        return self._transpose(u)

    def _gemm(self, a: Use, b: Use, shape: Shape, batch: int) -> Use:
        n = self.node
        assert n is not None
        node = self.g.add("gemm", "gemm", [a, b], shape, _desc(n), _line(n), batch=batch)
        return Use(node.vid, shape)

    def _matmul(self, a: Any, b: Any) -> Use:
        if not isinstance(a, Use) or not isinstance(b, Use):
            raise Unsupported(f"{self._here()}: matmul operands must be tensors")
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise Unsupported(f"{self._here()}: matmul with a vector is not supported")
        out = _shape(self.node)  # type: ignore[arg-type]
        if len(b.shape) == 2:
            if len(a.shape) > 2 and a.trans:
                raise Unsupported(f"{self._here()}: batched transposed A with a 2-D B")
            m = math.prod(a.shape[:-1])
            a2 = Use(a.vid, (m, a.shape[-1]), a.trans)
            r = self._gemm(a2, b, (m, b.shape[-1]), 1)
            return Use(r.vid, out)
        if len(a.shape) == 3 and len(b.shape) == 3 and a.shape[0] == b.shape[0]:
            return self._gemm(a, b, out, a.shape[0])
        raise Unsupported(f"{self._here()}: matmul of {a.shape} and {b.shape} is not supported")

    def _linear(self, x: Use, w: Any, b: Any) -> Use:
        if not isinstance(w, Use) or len(w.shape) != 2:
            raise Unsupported(f"{self._here()}: linear weight must be a 2-D tensor")
        out_shape = (*x.shape[:-1], w.shape[0])
        m = math.prod(x.shape[:-1])
        r = self._gemm(Use(x.vid, (m, x.shape[-1])), self._transpose(w), (m, w.shape[0]), 1)
        y = Use(r.vid, out_shape)
        if isinstance(b, Use):
            y = self._ew("add", [y, b], shape=out_shape)
        return y

    def _conv(self, n: torch.fx.Node, mod: Any, path: str, x: Use, transposed: bool) -> Use:
        if getattr(mod, "padding_mode", "zeros") != "zeros":
            raise Unsupported(f"{_desc(n)}: padding_mode={mod.padding_mode!r} is not supported")
        w = self._param(path, "weight")
        assert w is not None
        dims = len(x.shape) - 2
        fn = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
        out = _shape(n)
        params: dict[str, Any] = {
            "stride": tuple(mod.stride),
            "padding": mod.padding if isinstance(mod.padding, str) else tuple(mod.padding),
            "dilation": tuple(mod.dilation),
            "groups": int(mod.groups),
        }
        if transposed:
            params["output_padding"] = tuple(mod.output_padding)
        node = self.g.add("conv", fn, [x, w], out, _desc(n), _line(n), **params)
        y = Use(node.vid, out)
        b = self._param(path, "bias")
        if b is not None:
            y = self._ew("add", [y, Use(b.vid, (out[1],) + (1,) * dims)], shape=out)
        return y
