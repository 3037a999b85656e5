"""Submodules whose forward depends on data, run as PyTorch code inside the generated program.

A mixture of experts that loops over the experts a batch hit (`nonzero`, `.tolist()`) cannot be
traced on fake tensors: how many iterations run, and how many tokens each takes, depend on the
values. Rather than refuse the whole model, the capture finds the innermost module whose forward
raised, and traces again with every module of that type as one opaque call: the generated
program calls `self.get_submodule(path)(...)` there, as Inductor's fallback kernels call ATen,
and its kernels do the rest. A module whose outputs are not all tensors (a router that returns
Python lists of counts) cannot be such a call, so its parent is tried instead.

The opaque call's output shapes come from running a CPU copy of the module, with random weights,
on random inputs of the traced shapes (once per type and signature). A module whose weights
exceed `MAX_CPU_BYTES` is refused instead. The program runs such a call on plain launches: it
syncs with the host, which a CUDA graph cannot capture.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.catalog import LeafModule
from stitch_lsp.compiler.ir import Unsupported
from stitch_lsp.compiler.worker.fallback import DTYPES, NotPlain, python_literal, spelled_arguments

# Exceptions a fake-tensor trace raises where values decide shapes or control flow.
DATA_DEPENDENT = (
    "DynamicOutputShapeException",
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
)
# The largest module (parameters and buffers) run on the CPU for its output shapes.
MAX_CPU_BYTES = 2 << 30

RULE = LeafModule(
    modules=(),
    capture="stitch_lsp.compiler.worker.opaque_modules:capture_opaque",
    outputs="stitch_lsp.compiler.worker.opaque_modules:opaque_outputs",
    note="a data-dependent submodule, called as PyTorch code",
)

# id(module) -> (path, why, a copy made before the trace), while a trace runs. The copy's
# parameters are its own (the trace swaps in fake tensors): the CPU twin is made of it.
_MARKED: dict[int, tuple[str, str, nn.Module]] = {}
_SHAPES: dict[tuple[Any, ...], Any] = {}  # (type, signature) -> output structure on the CPU


class DataDependent(Unsupported):
    """A trace stopped where a submodule must run as PyTorch code: values decide its shapes or
    control flow, or its forward changes its own weights (`module_at_fault` finds which)."""


class NotOpaque(Unsupported):
    """The module at `path` cannot be one opaque call; its parent may be."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


def rule_for(module: nn.Module) -> LeafModule | None:
    return RULE if id(module) in _MARKED else None


def module_at_fault(exc: BaseException, model: nn.Module) -> str | None:
    """The path of the innermost submodule (not the model itself) whose forward is on the
    traceback of the exception, or of the one it was raised from, or None."""
    paths = {id(m): p for p, m in model.named_modules() if p}
    found = None
    for e in (exc, exc.__cause__):
        tb = e.__traceback__ if e is not None else None
        while tb is not None:
            frame = tb.tb_frame
            owner = frame.f_locals.get("self")
            if frame.f_code.co_name == "forward" and owner is not None and id(owner) in paths:
                found = paths[id(owner)]
            tb = tb.tb_next
    return found


@contextlib.contextmanager
def marked(model: nn.Module, types: dict[type, str]) -> Iterator[set[type]]:
    """Every module of these types (outside another such module) is opaque while tracing;
    `types` says why each is. Yields the types that have such a module."""
    inside: list[str] = []
    used: set[type] = set()
    for path, mod in model.named_modules():
        if path and type(mod) in types and not any(path.startswith(p + ".") for p in inside):
            inside.append(path)
            _MARKED[id(mod)] = (path, types[type(mod)], copy.deepcopy(mod))  # on meta: free
            used.add(type(mod))
    try:
        yield used
    finally:
        _MARKED.clear()


def _cpu_twin(module: nn.Module, path: str) -> nn.Module:
    """`module` (a copy made for this, on meta) moved to the CPU with random weights."""
    size = sum(t.numel() * t.element_size() for t in [*module.parameters(), *module.buffers()])
    if size > MAX_CPU_BYTES:
        raise NotOpaque(
            f"{display_path(path)} depends on data and holds {_size(size)} of weights: too large "
            f"to run on the CPU for its output shapes (at most {_size(MAX_CPU_BYTES)})",
            path,
        )
    twin = module.to_empty(device="cpu")
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for t in [*twin.parameters(), *twin.buffers()]:
            if t.is_floating_point():
                t.copy_(torch.randn(t.shape, generator=gen) * 0.02)
            else:
                t.zero_()
    return twin.eval()


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _real(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    if t.is_floating_point():
        return torch.randn(tuple(t.shape), generator=gen).to(t.dtype)
    if t.dtype == torch.bool:
        return torch.ones(tuple(t.shape), dtype=torch.bool)
    return torch.zeros(tuple(t.shape), dtype=t.dtype)


def opaque_outputs(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """The module's outputs as empty tensors on the traced device, their shapes from a CPU run."""
    path, _, clean = _MARKED[id(module)]
    flat, spec = pytree.tree_flatten((args, kwargs))
    tensors = [x for x in flat if isinstance(x, torch.Tensor)]
    device = tensors[0].device if tensors else torch.device("meta")
    weights = tuple((n, tuple(t.shape), t.dtype) for n, t in module.state_dict().items())
    key = (type(module), weights, repr(spec), tuple((tuple(t.shape), t.dtype) for t in tensors))
    if key not in _SHAPES:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily(), torch.no_grad():
            gen = torch.Generator().manual_seed(0)
            real = [_real(x, gen) if isinstance(x, torch.Tensor) else x for x in flat]
            r_args, r_kwargs = pytree.tree_unflatten(real, spec)
            try:
                twin = _cpu_twin(clean, path)
                out = type(module).forward(twin, *r_args, **r_kwargs)
            except NotOpaque:
                raise
            except Exception as exc:
                raise NotOpaque(
                    f"{display_path(path)} depends on data, and running it on the CPU for its "
                    f"output shapes failed: {type(exc).__name__}: {exc}",
                    path,
                ) from exc
        leaves = pytree.tree_leaves(out)
        if not leaves or any(not (x is None or isinstance(x, torch.Tensor)) for x in leaves):
            raise NotOpaque(
                f"{display_path(path)} depends on data and returns values that are not tensors",
                path,
            )
        if any(isinstance(x, torch.Tensor) and x.dtype not in DTYPES for x in leaves):
            raise NotOpaque(f"{display_path(path)} returns a tensor of an unsupported type", path)
        _SHAPES[key] = pytree.tree_map(
            lambda x: (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x, out
        )
    return pytree.tree_map(
        lambda x: (
            torch.empty(x[0], dtype=x[1], device=device)
            if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], torch.dtype)
            else x
        ),
        _SHAPES[key],
        is_leaf=lambda x: isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], torch.dtype),
    )


def capture_opaque(call: Any) -> Any:
    """One `aten` node that calls the module by its path; its outputs are the node's items."""
    try:
        spelled = spelled_arguments(call.args, call.kwargs)
    except NotPlain as exc:
        raise NotOpaque(
            f"{call.expr} depends on data, and an argument of its call ({exc}) has no source "
            "spelling",
            call.path,
        ) from exc
    template = f"self.get_submodule({python_literal(call.path)})({spelled.template})"
    operands = spelled.operands
    why = _MARKED[id(call.module)][1]
    said = {
        "why": f"{why}; the module runs as PyTorch code",
        "site": call.origin,
        "display": f"{call.expr} ({type(call.module).__name__})",
    }
    flat, spec = pytree.tree_flatten(call.output)
    tensors = [x for x in flat if isinstance(x, torch.Tensor)]
    if len(tensors) == 1 and len(flat) == 1:
        t = tensors[0]
        return call.add(
            "aten", "module", list(operands), tuple(t.shape), call=template,
            dtype=DTYPES[t.dtype], syncs=True, copy=True, **said,
        )  # fmt: skip
    whole = call.add("aten", "module", list(operands), (), call=template, dtype="tuple",
                     syncs=True, **said)  # fmt: skip
    items: list[Any] = []
    for k, x in enumerate(flat):
        if not isinstance(x, torch.Tensor):
            items.append(x)
            continue
        item = call.add(
            "aten", f"module[{k}]", [whole], tuple(x.shape), call=f"{{0}}{_index(spec, k)}",
            dtype=DTYPES[x.dtype], syncs=True, copy=True,
        )  # fmt: skip
        items.append(item)
    return pytree.tree_unflatten(items, spec)


def _index(spec: Any, k: int) -> str:
    """Python indexing of the k-th leaf of a (nested) tuple or list output."""
    path = pytree.tree_flatten_with_path(pytree.tree_unflatten(list(range(spec.num_leaves)), spec))
    keys = path[0][k][0]
    return "".join(f"[{getattr(key, 'idx', getattr(key, 'key', 0))!r}]" for key in keys)
