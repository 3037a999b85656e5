"""Analysis symbols -> hierarchical LSP DocumentSymbols (the editor's outline and breadcrumbs)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types as lsp

from stitch_lsp.analysis.model import Symbol
from stitch_lsp.server.convert import to_range

_KIND = {
    "module": lsp.SymbolKind.Class,
    "method": lsp.SymbolKind.Method,
    "function": lsp.SymbolKind.Function,
    "kernel": lsp.SymbolKind.Function,
    "device_function": lsp.SymbolKind.Function,
    "launch": lsp.SymbolKind.Event,
}
_DETAIL_PREFIX = {"kernel": "__global__", "device_function": "__device__", "launch": "launch"}


def to_document_symbols(symbols: Sequence[Symbol]) -> list[lsp.DocumentSymbol]:
    return [_one(s) for s in symbols]


def _one(s: Symbol) -> lsp.DocumentSymbol:
    rng = s.range
    sel = s.selection_range
    # LSP requires the selection inside the full range; clamp rather than let a client reject.
    if (sel[0], sel[1]) < (rng[0], rng[1]) or (sel[2], sel[3]) > (rng[2], rng[3]):
        sel = (rng[0], rng[1], rng[0], rng[1])
    prefix = _DETAIL_PREFIX.get(s.kind)
    detail = s.detail or prefix  # the analysis detail already carries the signature
    return lsp.DocumentSymbol(
        name=s.name or "<anonymous>",
        kind=_KIND.get(s.kind, lsp.SymbolKind.Object),
        range=to_range(rng),
        selection_range=to_range(sel),
        detail=detail,
        children=[_one(c) for c in s.children] or None,
    )
