"""The outline of a document: symbols, modules, functions, kernels and launches.

Built on first use (see `Analysis.outline`), from facts gathered while the diagnostics were
computed, and always in the coordinates of the document version those facts came from.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from stitch_lsp.analysis.cuda_facts import CudaFacts, RawFunction, Span
from stitch_lsp.analysis.diag import Range
from stitch_lsp.analysis.embedded import EmbeddedCuda
from stitch_lsp.analysis.model import (
    FunctionInfo,
    KernelInfo,
    LaunchInfo,
    ModuleInfo,
    Outline,
    Symbol,
)
from stitch_lsp.analysis.python_facts import PyClass, PyFacts, param_names
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.text_index import LineIndex

ToRange = Callable[[Span], Range]


def kernel_infos(
    facts: CudaFacts, to_range: ToRange, embedded_index: int | None
) -> tuple[list[KernelInfo], list[LaunchInfo], list[Symbol]]:
    """Kernels, launches and function symbols of one CUDA source, mapped by `to_range`."""
    launches = [
        LaunchInfo(
            kernel=raw.kernel,
            grid=raw.config[0] if raw.config else "",
            block=raw.config[1] if len(raw.config) > 1 else "",
            shared_mem=raw.config[2] if len(raw.config) > 2 else None,
            stream=raw.config[3] if len(raw.config) > 3 else None,
            args=raw.args,
            range=to_range(raw.span),
            name_range=to_range(raw.name_span),
            error_checked=raw.error_checked,
            embedded_index=embedded_index,
        )
        for raw in facts.launches
    ]
    kernels: list[KernelInfo] = []
    symbols: list[Symbol] = []
    for fn in facts.functions:
        sym = _function_symbol(fn, to_range, launches)
        symbols.append(sym)
        if fn.kind == "function":
            continue
        kernels.append(
            KernelInfo(
                name=fn.name,
                kind=fn.kind,  # type: ignore[arg-type]
                params=fn.params,
                signature=fn.signature,
                range=sym.range,
                selection_range=sym.selection_range,
                extern_c=fn.extern_c,
                template=fn.template,
                shared_memory=list(fn.shared_memory),
                syncthreads=fn.syncthreads,
                library_calls=list(fn.library_calls),
                launch_sites=[launch.range for launch in launches if launch.kernel == fn.name],
                embedded_index=embedded_index,
            )
        )
    return kernels, launches, symbols


def _function_symbol(fn: RawFunction, to_range: ToRange, launches: list[LaunchInfo]) -> Symbol:
    return Symbol(
        name=fn.name,
        kind=fn.kind,  # type: ignore[arg-type]
        range=to_range(fn.span),
        selection_range=to_range(fn.name_span),
        detail=fn.signature,
        children=[
            Symbol(
                name=f"{launches[i].kernel}<<<{launches[i].grid}, {launches[i].block}>>>",
                kind="launch",
                range=launches[i].range,
                selection_range=launches[i].name_range,
                detail=", ".join(launches[i].args),
            )
            for i in fn.launches
        ],
    )


def _fn_info(node_range: Callable[[Node], Range], fn: Node) -> FunctionInfo:
    name = fn.child_by_field_name("name") or fn
    return FunctionInfo(
        name=text(name),
        params=param_names(fn),
        range=node_range(fn),
        selection_range=node_range(name),
    )


def python_outline(
    index: LineIndex,
    facts: PyFacts,
    mod_classes: list[PyClass],
    embedded: list[EmbeddedCuda],
    all_facts: list[CudaFacts],
) -> Outline:
    """Modules, functions, kernels and the symbol tree of a Python file."""
    out = Outline()

    def node_range(node: Node) -> Range:
        a = index.point_to_position(node.start_point)
        b = index.point_to_position(node.end_point)
        return (a[0], a[1], b[0], b[1])

    symbols: list[Symbol] = []
    for cls in mod_classes:
        name = cls.node.child_by_field_name("name") or cls.node
        methods = [_fn_info(node_range, fn) for fn in cls.methods.values()]
        init, fwd = cls.methods.get("__init__"), cls.methods.get("forward")
        info = ModuleInfo(
            name=cls.name,
            bases=cls.bases,
            range=node_range(cls.node),
            selection_range=node_range(name),
            init_params=param_names(init) if init is not None else None,
            forward_params=param_names(fwd) if fwd is not None else None,
            methods=methods,
        )
        out.modules.append(info)
        symbols.append(
            Symbol(
                cls.name,
                "module",
                info.range,
                info.selection_range,
                detail=f"({', '.join(cls.bases)})",
                children=[
                    Symbol(m.name, "method", m.range, m.selection_range, f"({', '.join(m.params)})")
                    for m in methods
                ],
            )
        )
    for fn in facts.functions.values():
        info_fn = _fn_info(node_range, fn)
        out.functions.append(info_fn)
        symbols.append(
            Symbol(
                info_fn.name,
                "function",
                info_fn.range,
                info_fn.selection_range,
                f"({', '.join(info_fn.params)})",
            )
        )
        if info_fn.name == "get_inputs":
            out.get_inputs = info_fn
        elif info_fn.name == "get_init_inputs":
            out.get_init_inputs = info_fn

    # CUDA facts of each string.
    for j, (emb, f) in enumerate(zip(embedded, all_facts, strict=True)):

        def to_range(span: tuple[int, int], emb: EmbeddedCuda = emb) -> Range:
            return emb.virtual_bytes_to_document(span[0], span[1])

        kernels, launches, syms = kernel_infos(f, to_range, j)
        out.kernels.extend(kernels)
        out.launches.extend(launches)
        for s in syms:
            if s.kind != "function" or s.children:
                s.detail = f"{s.detail}  [CUDA in {emb.name or 'string'}]"
                symbols.append(s)
    symbols.sort(key=lambda s: (s.range[0], s.range[1]))
    out.symbols = symbols
    return out
