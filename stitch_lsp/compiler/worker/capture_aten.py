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
from typing import Any

import torch
import torch.fx
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import MinMax, select_op
from stitch_lsp.compiler.catalog import EwOp
from stitch_lsp.compiler.ir import Graph, Shape, Unsupported, Use
from stitch_lsp.compiler.worker.capture_leaves import (
    LEAF_OP,
    LeafCall,
    LeafRecord,
    leaves_as_ops,
    plain_attributes,
    run_leaf,
)
from stitch_lsp.compiler.worker.converter import (
    Converter,
    Missing,
    shape_or_none,
    traceback_frames,
    where_suffix,
)
from stitch_lsp.compiler.worker.lowering import for_aten
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


def _name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


class AtenConverter(Converter):
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
        super().__init__(gm, path)
        self.state_names = state_names
        self.plain = plain
        self.records = records
        self.model = model
        self.inputs = inputs
        self.input_names = input_names
        self.attr_values: dict[str, Any] = {}
        _, _, _, self.overloads = tables()

    def what(self, node: torch.fx.Node) -> str:
        if node.op != "call_function":
            return str(node.target)
        if node.target is LEAF_OP:
            rec = self.records[int(node.args[0])]  # type: ignore[arg-type]
            return display_path(rec.path)
        return "torch." + _name(node.target)

    def spelled(self, n: torch.fx.Node) -> str:
        return _name(n.target)

    def out_shape(self, n: torch.fx.Node) -> Shape | None:
        return shape_or_none(n)

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
            return Missing(self.desc(n)) if item is None else item
        if f is LEAF_OP:
            return self.leaf(n)
        if f in self.overloads:
            return self.ew(n, self.overloads[f])
        lowering = for_aten(_name(f))
        if lowering is None:
            raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")
        return lowering(self, n)

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
            self.b, rec.module, rec.path, args, kwargs, fake_out, self.label(n), self.line(n)
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

    def state_leaf(self, n: torch.fx.Node, name: str) -> Use:
        if name not in self.state_names:
            raise Unsupported(f"{self.desc(n)}: batch norm without num_batches_tracked")
        t = self._state_tensor(name)
        return self.b.leaf("buffer", name, tuple(t.shape), str(t.dtype).removeprefix("torch."))


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
        where = where_suffix(traceback_frames(exc.__traceback__), path)
        raise Unsupported(
            f"ATen-level capture failed: {type(exc).__name__}: {_first_line(exc)}{where}"
        ) from exc
    count = len(gm.graph.nodes)
    if count > MAX_ATEN_NODES:
        raise Unsupported(f"forward unrolls into {count} ATen ops (more than {MAX_ATEN_NODES})")
    return AtenConverter(gm, names, plain, records, model, inputs, input_names, path).run()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
