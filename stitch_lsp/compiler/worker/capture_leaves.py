"""Modules captured whole: the hook for ops such as nn.LSTM that become one IR node.

A module type listed in `catalog.LEAF_MODULES` is never traced into, in either capture path:
- fx: the tracer keeps it as one `call_module` node;
- ATen: before tracing, its instances' `forward` is replaced by a call of one opaque custom op
  (`stitch_capture::leaf`), whose fake kernel runs the real forward on fake tensors for the
  output shapes; the traced graph then holds one node where the module would have decomposed
  into per-step ops.
Either way the converter hands the call to the entry's capture function as a `LeafCall`: the
module, its path, forward's arguments with IR `Use`s in place of tensors, its output on meta or
fake tensors (structure, shapes, dtypes), and helpers to read the module's parameters and to add
IR nodes. The function returns the output structure with `Use`s in place of tensors, e.g.
`(out, (h_n, c_n))` for an LSTM.

Example entry (in catalog.LEAF_MODULES):
    LeafModule(modules=("torch.nn.LSTM",), capture="stitch_lsp.compiler.rnn:capture_lstm")
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import Builder
from stitch_lsp.compiler.catalog import LeafModule
from stitch_lsp.compiler.ir import NodeKind, Operand, Shape, Unsupported, Use
from stitch_lsp.compiler.worker.spelling import leaf_rule


def plain_attributes(model: nn.Module) -> dict[str, torch.Tensor]:
    """Tensors kept as plain attributes (neither parameters nor buffers), by dotted path."""
    found: dict[str, torch.Tensor] = {}
    for path, mod in model.named_modules():
        registered = set(mod._parameters) | set(mod._buffers)
        for name, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and name not in registered:
                found[f"{path}.{name}" if path else name] = value
    return found


@dataclass
class LeafCall:
    """One call of a module captured whole (see the module docstring)."""

    builder: Builder
    module: nn.Module
    path: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any
    origin: str
    line: int | None

    @property
    def expr(self) -> str:
        """The module as a reader sees it, e.g. `self.lstm` (for messages, never code)."""
        return display_path(self.path)

    def param(self, name: str) -> Use:
        """A parameter or buffer of the module, e.g. `weight_ih_l0`, as an IR leaf."""
        t = getattr(self.module, name, None)
        if not isinstance(t, torch.Tensor):
            raise Unsupported(f"{self.origin}: {self.expr} has no tensor `{name}`")
        kind = "param" if isinstance(t, nn.Parameter) else "buffer"
        dtype = str(t.dtype).removeprefix("torch.")
        path = f"{self.path}.{name}" if self.path else name
        return self.builder.leaf(kind, path, tuple(t.shape), dtype)

    def add(self, kind: NodeKind, fn: str, args: list[Operand], shape: Shape, **params: Any) -> Use:
        """An IR node that carries this call's origin and line."""
        self.builder.at(self.origin, self.line, None)
        return self.builder.add(kind, fn, args, shape, **params)

    def shapes(self) -> Any:
        """The output structure with tensor shapes in place of tensors."""
        return pytree.tree_map(
            lambda t: tuple(t.shape) if isinstance(t, torch.Tensor) else t, self.output
        )


def _load(spec: str) -> Callable[..., Any]:
    module_name, _, func = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), func)
    except (ImportError, AttributeError) as exc:
        raise Unsupported(f"the capture function {spec} cannot be loaded: {exc}") from exc


def capture_function(rule: LeafModule) -> Callable[[LeafCall], Any]:
    return _load(rule.capture)


def leaf_outputs(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A leaf module's outputs on meta or fake tensors: its rule's shape function, else forward."""
    rule = leaf_rule(module)
    if rule is not None and rule.outputs:
        return _load(rule.outputs)(module, *args, **kwargs)
    return type(module).forward(module, *args, **kwargs)


def run_leaf(call: LeafCall) -> Any:
    rule = leaf_rule(call.module)
    assert rule is not None
    call.builder.at(call.origin, call.line, None)
    return capture_function(rule)(call)


# -- the ATen path: one custom op per module call ------------------------------------------------


@dataclass
class LeafRecord:
    module: nn.Module
    path: str
    forward: Callable[..., Any]
    in_spec: Any
    in_flat: list[Any]  # forward's flattened arguments, tensors replaced by None
    out_spec: Any = None
    out_flat: list[Any] = field(default_factory=list)  # tensors replaced by None

    def rebuild_args(self, tensors: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        it = iter(tensors)
        flat = [next(it) if x is _TENSOR else x for x in self.in_flat]
        args, kwargs = pytree.tree_unflatten(flat, self.in_spec)
        return tuple(args), dict(kwargs)

    def rebuild_output(self, tensors: list[Any]) -> Any:
        it = iter(tensors)
        flat = [next(it) if x is _TENSOR else x for x in self.out_flat]
        return pytree.tree_unflatten(flat, self.out_spec)


_TENSOR = object()  # marks a tensor's place in a flattened argument list
_ACTIVE: list[LeafRecord] = []


def _run_record(index: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    rec = _ACTIVE[index]
    args, kwargs = rec.rebuild_args(list(tensors))
    out = leaf_outputs(rec.module, args, kwargs)
    flat, spec = pytree.tree_flatten(out)
    rec.out_spec = spec
    rec.out_flat = [_TENSOR if isinstance(x, torch.Tensor) else x for x in flat]
    # A custom op returns fresh tensors (an output may not alias an input).
    return [x.clone() for x in flat if isinstance(x, torch.Tensor)]


@torch.library.custom_op("stitch_capture::leaf", mutates_args=())
def _leaf_op(index: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _run_record(index, tensors)


@_leaf_op.register_fake
def _leaf_fake(index: int, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _run_record(index, tensors)


LEAF_OP = torch.ops.stitch_capture.leaf.default


@contextlib.contextmanager
def leaves_as_ops(model: nn.Module) -> Iterator[list[LeafRecord]]:
    """While tracing at the ATen level, every leaf module's call is one `stitch_capture::leaf`
    node; the records say which module and arguments each call had."""
    patched: list[nn.Module] = []
    _ACTIVE.clear()
    records = _ACTIVE  # the op's index argument indexes this list
    inside: list[str] = []
    for path, mod in model.named_modules():
        if not path or leaf_rule(mod) is None:
            continue
        if any(path.startswith(p + ".") for p in inside):
            continue
        inside.append(path)

        def forward(*args: Any, _mod: nn.Module = mod, _path: str = path, **kwargs: Any) -> Any:
            flat, spec = pytree.tree_flatten((args, kwargs))
            tensors = [x for x in flat if isinstance(x, torch.Tensor)]
            rec = LeafRecord(
                _mod,
                _path,
                type(_mod).forward.__get__(_mod),
                spec,
                [_TENSOR if isinstance(x, torch.Tensor) else x for x in flat],
            )
            records.append(rec)
            outs = _leaf_op(len(records) - 1, tensors)
            return rec.rebuild_output(list(outs))

        mod.forward = forward
        patched.append(mod)
    try:
        yield records
    finally:
        for mod in patched:
            del mod.forward
