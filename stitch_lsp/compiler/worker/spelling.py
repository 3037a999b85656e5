"""The catalog's spellings resolved to torch objects (functions, module types, ATen overloads)."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

import torch

from stitch_lsp.compiler import catalog
from stitch_lsp.compiler.catalog import EwOp, LeafModule, spellings


def resolve(dotted: str) -> Any:
    """`torch.nn.functional.relu` -> the object; None when this torch has no such name."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for p in parts[cut:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


def aten(name: str) -> Any:
    """`relu.default` -> torch.ops.aten.relu.default (None when absent)."""
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, packet), overload or "default")
    except AttributeError:
        return None


@cache
def tables() -> tuple[
    dict[Any, list[EwOp]], dict[str, list[EwOp]], dict[type, list[EwOp]], dict[Any, list[EwOp]]
]:
    """(functions, methods, module types, ATen overloads) -> the catalog entries they spell."""
    s = spellings()
    functions: dict[Any, list[EwOp]] = {}
    for name, ops in s.functions.items():
        obj = resolve(name)
        if obj is not None:
            functions.setdefault(obj, []).extend(ops)
    modules: dict[type, list[EwOp]] = {}
    for name, ops in s.modules.items():
        obj = resolve(name)
        if isinstance(obj, type):
            modules.setdefault(obj, []).extend(ops)
    overloads: dict[Any, list[EwOp]] = {}
    for name, ops in s.aten.items():
        obj = aten(name)
        if obj is not None:
            overloads.setdefault(obj, []).extend(ops)
    return functions, dict(s.methods), modules, overloads


def leaf_rule(module: torch.nn.Module) -> LeafModule | None:
    """The catalog's LeafModule entry for this module's type (subclasses match), if any; a
    data-dependent module marked opaque for this trace has the opaque call's rule."""
    from stitch_lsp.compiler.worker.opaque_modules import rule_for

    opaque = rule_for(module)
    if opaque is not None:
        return opaque
    for rule in catalog.LEAF_MODULES:
        for name in rule.modules:
            cls = resolve(name)
            if isinstance(cls, type) and isinstance(module, cls):
                return rule
    return None
