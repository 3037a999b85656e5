"""The harness's own globals, and whether a candidate replaced any (runs in the worker).

A candidate can make a wrong result pass by patching what the harness compares with:
`torch.allclose`, `torch.isclose` (which our comparison uses), `torch.testing.assert_close`,
tensor methods, the timers, or the Verifier's own functions, from Python or from C++ through
pybind11 or the Python C API. The static checks see the spelled forms; this sees the effect. The
objects are kept (not their ids), so a replacement can never be mistaken for the original.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import torch

# Functions the comparison and the timing rely on, and what KernelBench-style harnesses call.
_TORCH = (
    "allclose", "isclose", "equal", "eq", "abs", "max", "min", "sum", "all", "any", "isnan",
    "isfinite", "isinf", "nan_to_num", "argmax", "where", "clone", "empty", "empty_like",
    "manual_seed", "randn", "rand", "tensor", "as_tensor", "no_grad", "device", "Tensor",
    "float32", "float64",
)  # fmt: skip
_TESTING = ("assert_close", "assert_allclose", "make_tensor")
_CUDA = (
    "synchronize", "Event", "Stream", "current_stream", "default_stream", "stream",
    "manual_seed", "mem_get_info", "empty_cache", "get_device_name", "is_available",
)  # fmt: skip
_TIME = ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns")
_BUILTINS = ("float", "int", "abs", "max", "min", "sum", "all", "any", "len", "isinstance")
OURS = "stitch_lsp.verify"  # the Verifier's modules: every function and class they define


def _named(owner: str, obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {f"{owner}.{n}": getattr(obj, n) for n in names if hasattr(obj, n)}


def _class_dict(owner: str, cls: type) -> dict[str, Any]:
    """Every attribute the class has, as stored in the first class of its MRO that defines it
    (not as `getattr` builds it, which makes a new bound object each time). So a method set on
    `torch.Tensor` over one inherited from the C base class counts as a change."""
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object:
            continue
        for key, value in vars(klass).items():
            if f"{owner}.{key}" not in found and (callable(value) or hasattr(value, "__get__")):
                found[f"{owner}.{key}"] = value
    return found


def snapshot() -> dict[str, Any]:
    """The objects the harness relies on, by qualified name.

    TorchDynamo rebinds `torch.manual_seed` when it is first imported (wrapped so that it is
    never traced), which the profiler or a `torch.compile` baseline can trigger mid-run: it is
    imported first, so the snapshot holds what the rest of the run sees."""
    import builtins
    import contextlib
    import importlib

    with contextlib.suppress(Exception):
        importlib.import_module("torch._dynamo")

    found: dict[str, Any] = {}
    found |= _named("torch", torch, _TORCH)
    found |= _named("torch.testing", torch.testing, _TESTING)
    found |= _named("torch.cuda", torch.cuda, _CUDA)
    found |= _named("time", time, _TIME)
    found |= _named("builtins", builtins, _BUILTINS)
    found |= _class_dict("torch.Tensor", torch.Tensor)
    found |= _class_dict("torch.cuda.Event", torch.cuda.Event)
    for name, module in list(sys.modules.items()):
        if not name.startswith(OURS) or not isinstance(module, types.ModuleType):
            continue
        for key, value in list(vars(module).items()):
            if key.startswith("__"):
                continue
            if isinstance(value, type) and getattr(value, "__module__", "") == name:
                found[f"{name}.{key}"] = value
                found |= _class_dict(f"{name}.{key}", value)
            elif isinstance(value, types.FunctionType) and value.__module__ == name:
                found[f"{name}.{key}"] = value
    return found


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Names bound to another object than before, or gone (names added since do not count:
    importing a submodule adds attributes, it replaces none)."""
    return [name for name, obj in before.items() if name not in after or after[name] is not obj]


def patched(before: dict[str, Any]) -> list[str]:
    """What the candidate replaced since `before` was taken."""
    return changed(before, snapshot())
