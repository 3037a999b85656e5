"""The lowering table: how each registered op becomes IR, for both capture paths.

As in Inductor's `register_lowering`, each op (a `compiler.ops` entry) gets its lowering by a
module-level decorator in `compiler.worker.lowerings`:

    @register_lowering("sum")
    def sum_(cx: Converter, n: torch.fx.Node) -> Any: ...

A lowering receives the converter (its builder, argument binding, descriptions) and the node.
Where the torch-level spelling (`torch.sum(x, 1)`, `x.sum(1)`) and the ATen one
(`aten.sum.dim_IntList(x, [1])`) bind the same arguments, one lowering serves both paths;
where they do not, `path="fx"` and `path="aten"` register one for each, side by side.
The converters look ops up here by their spellings (`for_function`, `for_method`, `for_aten`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import torch.fx

from stitch_lsp.compiler.ops import OPS
from stitch_lsp.compiler.worker.spelling import resolve

if TYPE_CHECKING:
    from stitch_lsp.compiler.worker.converter import Converter

Lowering = Callable[["Converter", torch.fx.Node], Any]
Path = Literal["fx", "aten"]

_FX: dict[str, Lowering] = {}
_ATEN: dict[str, Lowering] = {}


def register_lowering(op: str, *, path: Path | None = None) -> Callable[[Lowering], Lowering]:
    """Register `fn` as the lowering of `op` (a `compiler.ops` name) on one path or both."""
    if op not in OPS:
        raise KeyError(f"{op!r} is not in compiler.ops: register the op first")

    def deco(fn: Lowering) -> Lowering:
        for table, which in ((_FX, "fx"), (_ATEN, "aten")):
            if path is None or path == which:
                if op in table:
                    raise ValueError(f"{op!r} has two {which} lowerings")
                table[op] = fn
        return fn

    return deco


class _Spellings:
    """Torch objects, method names and ATen names -> lowering, built once on first use."""

    def __init__(self) -> None:
        import stitch_lsp.compiler.worker.lowerings  # noqa: F401  (registers every lowering)

        self.functions: dict[Any, Lowering] = {}
        self.library: dict[str, Lowering] = {}
        self.methods: dict[str, Lowering] = {}
        self.aten: dict[str, Lowering] = {}
        for name, op in OPS.items():
            fx, aten = _FX.get(name), _ATEN.get(name)
            if fx is not None:
                for dotted in op.functions:
                    if dotted.split(".", 1)[0] in ("torch", "operator"):
                        obj = resolve(dotted)
                        if obj is not None:
                            self.functions[obj] = fx
                    else:  # a library's helper: matched by name, its library never imported here
                        self.library[dotted] = fx
                for method in op.methods:
                    self.methods[method] = fx
            if aten is not None:
                for spelled in op.aten:
                    self.aten[spelled] = aten


_spellings: _Spellings | None = None


def _table() -> _Spellings:
    global _spellings
    if _spellings is None:
        _spellings = _Spellings()
    return _spellings


def for_function(f: Any) -> Lowering | None:
    table = _table()
    found = table.functions.get(f)
    if found is None and table.library:
        module, name = getattr(f, "__module__", None), getattr(f, "__qualname__", None)
        if isinstance(module, str) and isinstance(name, str):
            found = table.library.get(f"{module}.{name}")
    return found


def for_method(name: str) -> Lowering | None:
    return _table().methods.get(name)


def for_aten(name: str) -> Lowering | None:
    return _table().aten.get(name)


def lowered_ops() -> dict[str, tuple[bool, bool]]:
    """op -> (has an fx lowering, has an ATen lowering); for the registry's own tests."""
    _table()
    return {name: (name in _FX, name in _ATEN) for name in OPS if name in _FX or name in _ATEN}
