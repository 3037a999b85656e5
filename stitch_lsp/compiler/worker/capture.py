"""Capture a KernelBench reference as an IR graph, with real shapes and no real memory.

The model and its inputs are built on the meta device, so capturing a problem that needs tens of
GB costs nothing. Capture tries two paths and keeps the first that succeeds:
1. torch.fx symbolic tracing (capture_fx): module-level names, readable kernels, the
   reference's own line numbers;
2. where that fails (einops, Python the tracer cannot follow, modules such as
   nn.MultiheadAttention), tracing at the ATen level on fake tensors (capture_aten).
Both map their ops through the op catalog onto one IR builder. A refusal names the op and line.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any

import torch

from stitch_lsp.compiler.attr_path import comment_text, display_path
from stitch_lsp.compiler.ir import Graph, Unsupported


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


def build_on_meta(path: Path) -> tuple[torch.nn.Module, list[Any]]:
    mod = load_problem(path)
    try:
        with torch.device("meta"):
            model = mod.Model(*mod.get_init_inputs())
        # A legacy constructor (`nn.Parameter(torch.FloatTensor(d, h, k))`, XLNet's attention
        # weights) ignores the device context and makes a CPU tensor: every tensor goes to meta,
        # as the rest of the model is, so the trace does not mix devices.
        if any(t.device.type != "meta" for t in (*model.parameters(), *model.buffers())):
            model = model.to("meta")
    except Exception as meta_exc:
        # Some constructors read values back (Swin's drop-path rates: `x.item()` on a linspace),
        # which meta tensors cannot do. Such a model is built on the CPU, then moved to meta.
        try:
            with torch.device("cpu"):
                model = mod.Model(*mod.get_init_inputs()).to("meta")
        except Exception as exc:
            raise Unsupported(
                f"building the model failed: {type(exc).__name__}: {exc}"
                f"{_where(exc, path)} (on the meta device: {meta_exc})"
            ) from exc
    with torch.device("meta"):
        try:
            inputs = list(mod.get_inputs())
        except Exception as exc:
            raise Unsupported(
                f"get_inputs() failed on the meta device: {type(exc).__name__}: {exc}"
                f"{_where(exc, path)}"
            ) from exc
    return model, inputs


def _where(exc: BaseException, path: Path) -> str:
    """` (line N)` of the reference's deepest frame in the traceback, so a refusal names it; where
    a library raised it, ` (at lib.py:K, called from line N)`."""
    from stitch_lsp.compiler.worker.converter import (
        reference_line,
        traceback_frames,
        where_suffix,
    )

    target = str(Path(path).resolve())
    frames = traceback_frames(exc.__traceback__)
    in_library = where_suffix(frames, target)
    if in_library:
        return in_library
    line = reference_line(frames, target)
    return f" (line {line})" if line is not None else ""


def forward_names(model: torch.nn.Module, count: int) -> list[str]:
    params = list(inspect.signature(model.forward).parameters)
    return (params + [f"input{i}" for i in range(len(params), count)])[:count]


def defaulted_args(model: torch.nn.Module, given: int) -> dict[str, Any]:
    """forward's parameters that get_inputs() does not fill, at their defaults (`h0=None`), so
    `if h0 is None:` takes the branch the reference really runs."""
    params = list(inspect.signature(model.forward).parameters.values())[given:]
    return {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def _check_names(model: torch.nn.Module) -> None:
    """A submodule, parameter or buffer name with a dot (setattr allows one) cannot be told from
    a path, so the candidate could not find it: refused with the name, before any tracing."""
    seen: set[int] = set()

    def walk(mod: torch.nn.Module, where: str) -> None:
        if id(mod) in seen:
            return
        seen.add(id(mod))
        for kind, names in (("parameter", mod._parameters), ("buffer", mod._buffers)):
            for name in names:
                if "." in name or not name:
                    raise Unsupported(
                        f"the {kind} {comment_text(repr(name))} of {display_path(where)} has "
                        "a dot in its name (or none), so no attribute path can name it"
                    )
        for name, child in mod._modules.items():
            if "." in name or not name:
                raise Unsupported(
                    f"the submodule {comment_text(repr(name))} of {display_path(where)} has a "
                    "dot in its name (or none), so no attribute path can name it"
                )
            if child is not None:
                walk(child, f"{where}.{name}" if where else name)

    walk(model, "")


def capture(path: Path) -> Graph:
    model, inputs = build_on_meta(path)
    _check_names(model)
    defaulted = defaulted_args(model, len(inputs))  # before the trace runs forward on it
    graph = _capture(path, model, inputs)
    graph.defaulted = defaulted
    return graph


def _capture(path: Path, model: torch.nn.Module, inputs: list[Any]) -> Graph:
    from stitch_lsp.compiler.worker.capture_aten import capture_aten
    from stitch_lsp.compiler.worker.capture_fx import FxConverter, trace

    where = str(Path(path).resolve())
    try:
        gm = trace(model, inputs)
    except Exception as exc:
        fx_error = Unsupported(
            f"torch.fx could not trace forward: {type(exc).__name__}: {exc}{_where(exc, path)}"
        )
        traced = False
    else:
        traced = True
        try:
            return FxConverter(gm, inputs, where).run()
        except Unsupported as exc:
            fx_error = exc
        except Exception as exc:  # a lowering this call's arguments surprised: try ATen
            fx_error = Unsupported(
                f"the torch.fx capture failed: {type(exc).__name__}: {exc}{_where(exc, path)}"
            )
    # The fx trace ran forward on meta tensors: build a fresh model for the ATen trace.
    model, inputs = build_on_meta(path)
    try:
        return capture_aten(model, inputs, forward_names(model, len(inputs)), where)
    except Unsupported as exc:
        # The fx converter handles float32 only: its refusal of a half-precision model says
        # nothing the ATen capture's does not say better.
        if not traced or "the builtin coder handles float32" in str(fx_error):
            raise exc from None
        if _lines(str(exc)) <= _lines(str(fx_error)):
            raise fx_error from None  # the same place, said with the reference's own names
        raise Unsupported(f"{fx_error}; at the ATen level: {exc}") from None


def _lines(message: str) -> set[str]:
    """The places a refusal names: `(line N)` as `N`, `(at lib.py:K, called from line N)` as
    `lib.py:K N`: a library model's refusals all come from its wrapper's one line, and the
    library line is what tells them apart."""
    found = re.findall(r"\((?:at ([^()]*?), called from )?line (\d+)\)", message)
    return {f"{lib} {line}" if lib else line for lib, line in found}
