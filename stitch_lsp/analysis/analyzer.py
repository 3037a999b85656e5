"""`analyze(doc)`: one pass from a Document to symbols, facts and diagnostics.

The result is cached on the document per revision. CUDA strings are parsed through a
content-keyed cache, so typing in Python code never re-parses the CUDA it carries.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node

from stitch_lsp.analysis import cuda_facts, python_facts
from stitch_lsp.analysis.cuda_checks import cuda_diagnostics
from stitch_lsp.analysis.cuda_facts import CudaFacts, RawFunction
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.embedded import Declined, EmbeddedCuda, Role, build_embedded
from stitch_lsp.analysis.grammars import find_all
from stitch_lsp.analysis.model import (
    Analysis,
    FunctionInfo,
    KernelInfo,
    LaunchInfo,
    LoadInlineCall,
    ModuleInfo,
    Outline,
    Symbol,
)
from stitch_lsp.analysis.python_checks import (
    HEAVY_OPS,
    LIGHT_OPS,
    CandidateContext,
    check_candidate,
    check_file_wide,
    extension_ctor,
    reference_is_low_precision,
)
from stitch_lsp.analysis.python_facts import HEADER, LoadCall, PyFacts, module_classes, param_names
from stitch_lsp.analysis.syntax import ancestors as _ancestors
from stitch_lsp.analysis.syntax import first_error, text
from stitch_lsp.analysis.text_index import LineIndex
from stitch_lsp.config import Settings
from stitch_lsp.models.findings import Severity

_DEFAULT_MAX_BYTES = Settings.model_fields["max_file_bytes"].default
# ATen compute called from C++/CUDA source: torch::matmul(...), at::relu(...).
_ATEN_CALL = re.compile(rb"(?:torch|at)::(\w+)\s*\(")


_CALLED_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@lru_cache(maxsize=256)
def _aten_calls(data: bytes) -> tuple[tuple[int, int, str], ...]:
    """(start, end, op) of each ATen compute call in a virtual source, cached by content."""
    out = []
    for at in sorted(find_all(data, (b"torch::", b"at::"))):
        if at and (data[at - 1 : at].isalnum() or data[at - 1 : at] in (b"_", b":")):
            continue
        m = _ATEN_CALL.match(data, at)
        if m and (m.group(1).decode() in HEAVY_OPS or m.group(1).decode() in LIGHT_OPS):
            out.append((m.start(), m.end() - 1, m.group(1).decode()))
    return tuple(out)


def analyze(doc: Document, settings: Settings | None = None) -> Analysis:
    """Analyse one document (cached per document revision)."""
    max_bytes = settings.max_file_bytes if settings is not None else _DEFAULT_MAX_BYTES
    key = (doc.revision, max_bytes)
    cached = doc.cache.get("analysis")
    if cached is not None and cached[0] == key:
        return cached[1]
    result = _analyze(doc, max_bytes)
    doc.cache["analysis"] = (key, result)
    return result


def _path_of(doc: Document) -> str:
    path = doc.path
    return str(path) if path is not None else doc.uri


def _analyze(doc: Document, max_bytes: int) -> Analysis:
    lang = doc.grammar or "other"
    result = Analysis(uri=doc.uri, language=lang, version=doc.version)  # type: ignore[arg-type]
    diags: list[Diag] = []
    if doc.decode_error is not None:
        row, col = doc.decode_error
        pos = doc.index.point_to_position((row, col))
        diags.append(
            Diag(
                (pos[0], pos[1], pos[0], pos[1] + 1),
                Severity.warning,
                "encoding",
                "the file is not valid UTF-8 here; undecodable bytes were read as U+FFFD",
            )
        )
    if doc.size > max_bytes:
        result.skipped = f"file is {doc.size} bytes, over maxFileBytes ({max_bytes})"
        diags.append(
            Diag(
                (0, 0, 0, 0),
                Severity.information,
                "file-too-large",
                f"stitch-lsp skipped deep checks: {result.skipped}",
            )
        )
    elif lang == "python":
        _analyze_python(doc, result, diags)
    elif lang == "cuda":
        _analyze_cuda_file(doc, result, diags)
    path = _path_of(doc)
    seen: set[tuple[Range, str, str]] = set()
    for d in sorted(diags, key=lambda d: d.range):
        k = (d.range, d.rule_id, d.message)
        if k not in seen:
            seen.add(k)
            result.diagnostics.append(d.finding(path))
    return result


# -- shared pieces ------------------------------------------------------------------------------


def _parse_error_diag(doc: Document, root: Node, severity: Severity, what: str) -> Diag | None:
    err = first_error(root)
    if err is None:
        return None
    if err.is_missing:
        rng = doc.node_range(err.start_point, err.end_point)
        missing = err.type if err.type.isprintable() and len(err.type) < 20 else "a token"
        return Diag(
            (rng[0], rng[1], rng[2], max(rng[3], rng[1] + 1)),
            severity,
            "parse-error",
            f"{what} does not parse: `{missing}` is missing here; the rest was still checked",
        )
    # Point at the last line of the broken stretch: parsers notice trouble where it ends.
    last = err.children[-1] if err.children else err
    start = last.start_point if last.start_point[0] == err.end_point[0] else (err.end_point[0], 0)
    rng = doc.node_range(start, err.end_point)
    line = doc.index.line_bytes(rng[0]).decode("utf-8", "replace").strip()
    detail = f" near `{line[:60]}`" if line else ""
    return Diag(
        rng,
        severity,
        "parse-error",
        f"{what} does not parse{detail}; the rest of the file was still checked",
    )


def _kernel_infos(
    facts: CudaFacts, to_range, embedded_index: int | None
) -> tuple[list[KernelInfo], list[LaunchInfo], list[Symbol]]:
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


def _function_symbol(fn: RawFunction, to_range, launches: list[LaunchInfo]) -> Symbol:
    kind = fn.kind if fn.kind != "function" else "function"
    return Symbol(
        name=fn.name,
        kind=kind,  # type: ignore[arg-type]
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


# -- CUDA files ---------------------------------------------------------------------------------


def _analyze_cuda_file(doc: Document, result: Analysis, diags: list[Diag]) -> None:
    tree = doc.tree
    assert tree is not None
    root = tree.root_node
    err = _parse_error_diag(doc, root, Severity.information, "this CUDA code")
    if err is not None:
        diags.append(err)
    facts = cuda_facts.extract(root)
    index = doc.index

    def to_range(span: tuple[int, int]) -> Range:
        a = index.byte_to_position(span[0])
        b = index.byte_to_position(span[1])
        return (a[0], a[1], b[0], b[1])

    def outline() -> Outline:
        kernels, launches, symbols = _kernel_infos(facts, to_range, None)
        return Outline(symbols=symbols, kernels=kernels, launches=launches)

    result.outline_builder = outline
    path = doc.path
    header = path is not None and path.suffix.lower() in (".cuh", ".h", ".hpp")
    diags.extend(
        cuda_diagnostics(
            facts,
            to_range,
            launched=facts.launched_names(),
            check_unused=not header,
            check_streams=False,
        )
    )


# -- Python files -------------------------------------------------------------------------------


def _header(doc: Document) -> str | None:
    """The reference path from a `# stitch-lsp: reference=...` comment at the top of the file."""
    head = doc.data[:4096].decode("utf-8", "replace")
    for line in head.splitlines()[:40]:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        m = HEADER.match(stripped)
        if m:
            return m.group(1)
    return None


def _fn_info(node_range, fn: Node) -> FunctionInfo:
    name = fn.child_by_field_name("name") or fn
    return FunctionInfo(
        name=text(name),
        params=param_names(fn),
        range=node_range(fn),
        selection_range=node_range(name),
    )


def _items(expr: Node, facts: PyFacts) -> list[Node]:
    """The string expressions of a sources argument: a list/tuple, or one expression."""
    node = expr
    if node.type == "identifier":
        bound = facts.resolve(node)
        if bound is not None and bound.type in ("list", "tuple"):
            node = bound
    if node.type in ("list", "tuple"):
        return [c for c in node.named_children if c.type != "comment"]
    return [expr]


def _literal_strings(expr: Node | None, facts: PyFacts) -> list[str]:
    if expr is None:
        return []
    out = []
    for item in _items(expr, facts):
        if item.type == "string" and not any(c.type == "interpolation" for c in item.children):
            content = "".join(text(c) for c in item.named_children if c.type == "string_content")
            out.append(content)
    return out


def _source_args(call: LoadCall) -> list[tuple[Role, Node]]:
    if call.kind == "load_inline":
        pairs: list[tuple[Role, Node | None]] = [
            ("cpp_sources", call.argument("cpp_sources", 1)),
            ("cuda_sources", call.argument("cuda_sources", 2)),
        ]
    elif call.kind == "load_cuda":
        arg = call.argument("source", 0)
        if arg is None:
            arg = next(
                (v for k, v in call.keywords().items() if re.search("source|src|code", k)), None
            )
        pairs = [("load_cuda", arg)]
    else:
        pairs = []
    return [(role, node) for role, node in pairs if node is not None]


def _analyze_python(doc: Document, result: Analysis, diags: list[Diag]) -> None:
    tree = doc.tree
    assert tree is not None
    root = tree.root_node
    err = _parse_error_diag(doc, root, Severity.error, "this Python code")
    if err is not None:
        diags.append(err)
    facts = python_facts.extract(root, doc.data)
    result.reference_header = _header(doc)

    def node_range(node: Node) -> Range:
        return doc.node_range(node.start_point, node.end_point)

    # Calls that build CUDA, and the strings they carry.
    used_literals: set[int] = set()
    for i, call in enumerate(facts.load_calls):
        parent = call.node.parent
        target = None
        if parent is not None and parent.type == "assignment":
            target = text(parent.child_by_field_name("left"))
        kind = call.kind if call.kind in ("load_inline", "load", "load_cuda") else "load"
        lic = LoadInlineCall(
            function=call.callee,
            kind=kind,  # type: ignore[arg-type]
            range=node_range(call.node),
            target=target,
            name=(_literal_strings(call.argument("name", 0), facts) or [None])[0]
            if call.kind != "load_cuda"
            else (_literal_strings(call.keywords().get("name"), facts) or [None])[0],
            functions=_literal_strings(call.argument("functions", 3), facts)
            if call.kind == "load_inline"
            else [],
            sources=_literal_strings(call.argument("sources", 1), facts)
            if call.kind == "load"
            else [],
        )
        for role, expr in _source_args(call):
            items = _items(expr, facts)
            try:
                emb = build_embedded(
                    items,
                    doc.data,
                    doc.index,
                    facts.resolve,
                    role,
                    name=text(items[0])
                    if len(items) == 1 and items[0].type == "identifier"
                    else None,
                    call_index=i,
                )
            except Declined as exc:
                lic.declined.append(f"{role}: {exc}")
                continue
            used_literals.update(s for s, _ in emb.literal_spans)
            if not emb.text.strip():
                continue
            lic.embedded.append(len(result.embedded))
            result.embedded.append(emb)
        result.load_inline_calls.append(lic)

    # Module-level CUDA strings no call uses directly (cupy kernels, sources built later).
    for name, values in facts.assignments.items():
        value = values[-1]
        if value.type not in ("string", "concatenated_string", "parenthesized_expression"):
            continue
        if b"__global__" not in (value.text or b""):
            continue
        if any(value.start_byte <= s < value.end_byte for s in used_literals):
            continue
        try:
            emb = build_embedded([value], doc.data, doc.index, facts.resolve, "string", name=name)
        except Declined:
            continue
        result.embedded.append(emb)

    all_facts = [cuda_facts.facts_of_source(emb.data) for emb in result.embedded]
    result.defines_model_new = facts.cls("ModelNew") is not None
    mod_classes = module_classes(facts)
    index = doc.index  # the outline is built later, maybe after the document has moved on
    result.outline_builder = lambda: _python_outline(index, facts, mod_classes, result, all_facts)

    launched: set[str] = set()
    for f in all_facts:
        launched |= f.launched_names()
    candidate = result.is_candidate
    cuda_parse_reported = err is not None
    for emb, f in zip(result.embedded, all_facts, strict=True):
        if emb.role == "string":
            continue  # not built by a loader we can see: outline and hovers only

        def to_range(span: tuple[int, int], emb: EmbeddedCuda = emb) -> Range:
            return emb.virtual_bytes_to_document(span[0], span[1])

        if f.parse_error is not None and not cuda_parse_reported:
            cuda_parse_reported = True
            diags.append(
                Diag(
                    to_range(f.parse_error),
                    Severity.information,
                    "parse-error",
                    f"the CUDA in {emb.name or 'this string'} does not parse here; "
                    "checks ran on the rest (nvcc has the final word)",
                )
            )
        diags.extend(
            cuda_diagnostics(
                f,
                to_range,
                launched=launched,
                check_unused=True,
                check_streams=candidate,
            )
        )

    if candidate:
        diags.extend(_candidate_checks(doc, result, facts, mod_classes, all_facts, node_range))


def _python_outline(
    index: LineIndex,
    facts: PyFacts,
    mod_classes: list,
    result: Analysis,
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
    for j, (emb, f) in enumerate(zip(result.embedded, all_facts, strict=True)):

        def to_range(span: tuple[int, int], emb: EmbeddedCuda = emb) -> Range:
            return emb.virtual_bytes_to_document(span[0], span[1])

        kernels, launches, syms = _kernel_infos(f, to_range, j)
        out.kernels.extend(kernels)
        out.launches.extend(launches)
        for s in syms:
            if s.kind != "function" or s.children:
                s.detail = f"{s.detail}  [CUDA in {emb.name or 'string'}]"
                symbols.append(s)
    symbols.sort(key=lambda s: (s.range[0], s.range[1]))
    out.symbols = symbols
    return out


@lru_cache(maxsize=64)
def _reference_low_precision(path: str, mtime: float) -> bool:
    try:
        return reference_is_low_precision(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


def _reference_fp32(doc: Document, result: Analysis, facts: PyFacts) -> bool:
    ref = facts.cls("Model")
    if ref is not None:
        source = text(ref.node)
        gi = facts.functions.get("get_inputs")
        if gi is not None:
            source += text(gi)
        return not reference_is_low_precision(source)
    if result.reference_header and doc.path is not None:
        path = (doc.path.parent / result.reference_header).resolve()
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return True
        return not _reference_low_precision(str(path), mtime)
    return True


def _candidate_checks(
    doc: Document,
    result: Analysis,
    facts: PyFacts,
    mod_classes,
    all_facts: list[CudaFacts],
    node_range,
) -> list[Diag]:
    mod_names = {c.name for c in mod_classes}
    model_new = facts.cls("ModelNew")
    reference_names = {"Model"}
    if model_new is not None:
        candidates = [model_new]
        # Helper modules ModelNew builds in __init__ are part of the solution.
        queue = [model_new]
        while queue:
            cls = queue.pop()
            init = cls.methods.get("__init__")
            if init is None:
                continue
            called = set(_CALLED_NAME.findall(text(init)))
            for name in sorted((mod_names - reference_names) & called):
                helper = facts.cls(name)
                if helper is not None and helper not in candidates:
                    candidates.append(helper)
                    queue.append(helper)
    else:
        candidates = [c for c in mod_classes if c.name not in reference_names]
    reference_names -= {c.name for c in candidates}

    # What binds compiled CUDA: targets of load calls, factories that return one, cupy/triton.
    handles: set[str] = set()
    factories: set[str] = set()
    for lic, call in zip(result.load_inline_calls, facts.load_calls, strict=True):
        if lic.target:
            handles.add(lic.target)
        fn = next((a for a in _ancestors(call.node) if a.type == "function_definition"), None)
        if fn is not None and any(fn == f for f in facts.functions.values()):
            factories.add(text(fn.child_by_field_name("name")))
    handles |= factories
    extension_kernels = False
    for lic in result.load_inline_calls:
        if lic.declined or lic.kind == "load":
            extension_kernels = True
        launched = set().union(*(all_facts[j].launched_names() for j in lic.embedded))
        for j in lic.embedded:
            f = all_facts[j]
            if f.library_calls or any(
                k.kind == "kernel" and (k.name in launched or k.extern_c) for k in f.kernels
            ):
                extension_kernels = True
    for name, values in facts.assignments.items():
        v = values[-1]
        if v.type == "call":
            callee = text(v.child_by_field_name("function"))
            if callee in factories or extension_ctor(callee):
                handles.add(name)
                if (
                    not callee.endswith(("load_inline", "load", "load_cuda"))
                    and callee not in factories
                ):
                    extension_kernels = True
    for fname, fn in facts.functions.items():
        parent = fn.parent
        if (
            parent is not None
            and parent.type == "decorated_definition"
            and re.search(r"@\s*(triton\.jit|cuda\.jit|numba\.cuda\.jit)", text(parent))
        ):
            handles.add(fname)
            extension_kernels = True
    for cls in candidates:
        init = cls.methods.get("__init__")
        if init is None:
            continue
        for m in re.finditer(r"(self\.\w+)\s*=\s*([\w.]+)\s*\(", text(init)):
            if m.group(2) in factories or extension_ctor(m.group(2)):
                handles.add(m.group(1))
                if not m.group(2).endswith(("load_inline", "load", "load_cuda")):
                    extension_kernels = True

    ctx = CandidateContext(
        facts=facts,
        to_range=node_range,
        candidates=candidates,
        reference_names=reference_names,
        reference_fp32=_reference_fp32(doc, result, facts),
        extension_handles=handles,
        extension_kernels=extension_kernels,
    )
    check_candidate(ctx)
    check_file_wide(ctx, doc.tree.root_node, doc.data)  # type: ignore[union-attr]
    _aten_in_sources(ctx, result, extension_kernels)
    return ctx.diags


def _aten_in_sources(ctx: CandidateContext, result: Analysis, has_kernels: bool) -> None:
    """C++ in the extension that calls ATen compute (torch::matmul) is PyTorch doing the work."""
    for emb in result.embedded:
        if emb.role == "string":
            continue
        for start, end, op in _aten_calls(emb.data):
            rng = emb.virtual_bytes_to_document(start, end)
            call = emb.data[start:end].decode().rstrip("( ")
            if not has_kernels:
                sev, msg = (
                    Severity.error,
                    f"`{call}` runs PyTorch's operator inside the extension and no custom CUDA "
                    "kernel is launched: this is PyTorch, not a CUDA implementation",
                )
            elif op in HEAVY_OPS:
                sev, msg = (
                    Severity.information,
                    f"`{call}` stays on PyTorch's vendor library (cuBLAS/cuDNN); the custom CUDA "
                    "covers the rest",
                )
            else:
                sev, msg = Severity.warning, f"`{call}` is left to PyTorch: fuse it into the kernel"
            ctx.diags.append(Diag(rng, sev, "torch-op", msg))
