"""`analyze(doc)`: one pass from a Document to symbols, facts and diagnostics.

The result is cached on the document per revision. CUDA strings are parsed through a
content-keyed cache, so typing in Python code never re-parses the CUDA it carries.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from stitch_lsp.analysis import cuda_facts, python_facts
from stitch_lsp.analysis.candidate import candidate_checks
from stitch_lsp.analysis.cuda_checks import cuda_diagnostics
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.embedded import Declined, EmbeddedCuda, Role, build_embedded
from stitch_lsp.analysis.extension_checks import Source
from stitch_lsp.analysis.grammars import ParseTimeout
from stitch_lsp.analysis.model import Analysis, LoadInlineCall, Outline
from stitch_lsp.analysis.outline import kernel_infos, python_outline
from stitch_lsp.analysis.python_facts import LoadCall, PyFacts, module_classes
from stitch_lsp.analysis.syntax import first_error, text
from stitch_lsp.candidate_header import find_reference
from stitch_lsp.config import Settings
from stitch_lsp.models.findings import Severity

_DEFAULT_MAX_BYTES = Settings.model_fields["max_file_bytes"].default


def analyze(doc: Document, settings: Settings | None = None) -> Analysis:
    """Analyse one document (cached per document revision)."""
    max_bytes = settings.max_file_bytes if settings is not None else _DEFAULT_MAX_BYTES
    dtype = settings.reference_dtype if settings is not None else "auto"
    key = (doc.revision, max_bytes, dtype)
    cached = doc.cache.get("analysis")
    if cached is not None and cached[0] == key:
        return cached[1]
    result = _analyze(doc, max_bytes, dtype)
    doc.cache["analysis"] = (key, result)
    return result


def _path_of(doc: Document) -> str:
    path = doc.path
    return str(path) if path is not None else doc.uri


def _analyze(doc: Document, max_bytes: int, dtype: str = "auto") -> Analysis:
    lang = doc.grammar or "other"
    result = Analysis(uri=doc.uri, language=lang, version=doc.version)
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
    elif lang in ("python", "cuda") and (why := doc.binary) is not None:
        result.skipped = f"the file looks binary: {why}"
        diags = [  # one notice: the encoding warning would only repeat it
            Diag(
                (0, 0, 0, 0),
                Severity.information,
                "binary-file",
                f"stitch-lsp skipped this file: {result.skipped}",
            )
        ]
    elif lang in ("python", "cuda"):
        try:
            if lang == "python":
                _analyze_python(doc, result, diags, dtype)
            else:
                _analyze_cuda_file(doc, result, diags)
        except ParseTimeout as exc:
            result = Analysis(uri=doc.uri, language=lang, version=doc.version)
            result.skipped = str(exc)
            diags = [d for d in diags if d.rule_id == "encoding"]
            diags.append(
                Diag(
                    (0, 0, 0, 0),
                    Severity.information,
                    "parse-timeout",
                    f"stitch-lsp skipped deep checks: {exc}",
                )
            )
    path = _path_of(doc)
    seen: set[tuple[Range, str, str]] = set()
    for d in sorted(diags, key=lambda d: d.range):
        k = (d.range, d.rule_id, d.message)
        if k not in seen:
            seen.add(k)
            result.diagnostics.append(d.finding(path))
    return result


# -- shared pieces ------------------------------------------------------------------------------


def _parse_error_diag(
    doc: Document, roots: list[Node], severity: Severity, what: str
) -> Diag | None:
    err = next((e for root in roots if (e := first_error(root)) is not None), None)
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


# -- CUDA files ---------------------------------------------------------------------------------


def _analyze_cuda_file(doc: Document, result: Analysis, diags: list[Diag]) -> None:
    (root,) = doc.roots
    # An error, as in a Python file: a .cu file that does not parse will not build either.
    err = _parse_error_diag(doc, [root], Severity.error, "this CUDA code")
    if err is not None:
        diags.append(err)
    facts = cuda_facts.extract(root, doc.data)
    index = doc.index

    def to_range(span: tuple[int, int]) -> Range:
        a = index.byte_to_position(span[0])
        b = index.byte_to_position(span[1])
        return (a[0], a[1], b[0], b[1])

    def outline() -> Outline:
        kernels, launches, symbols = kernel_infos(facts, to_range, None)
        return Outline(symbols=symbols, kernels=kernels, launches=launches)

    result.outline_builder = outline
    path = doc.path
    header = path is not None and path.suffix.lower() in (".cuh", ".h", ".hpp")
    diags.extend(
        cuda_diagnostics(
            facts,
            to_range,
            launched=facts.launched_names(),
            # A file of kernels without host code is launched from elsewhere (another
            # translation unit, NVRTC, the driver API): only a launcher file can tell.
            check_unused=not header and any(f.kind == "function" for f in facts.functions),
            check_streams=False,
        )
    )


# -- Python files -------------------------------------------------------------------------------


def reference_header(doc: Document) -> str | None:
    """The reference path from a `# stitch-lsp: reference=...` comment at the top of the file."""
    return find_reference(doc.data[:4096].decode("utf-8", "replace"))


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


_FLAG_KEYWORDS = ("extra_cuda_cflags", "extra_cflags", "extra_flags")
_DEFINE = re.compile(r"^-D\s*([A-Za-z_]\w*)")


def _build_defines(call: LoadCall, facts: PyFacts) -> set[str] | None:
    """Macros a build's -D flags define; None when its flags are not literal strings."""
    out: set[str] = set()
    for name, value in call.keywords().items():
        if name not in _FLAG_KEYWORDS:
            continue
        items = _items(value, facts)
        flags = _literal_strings(value, facts)
        if len(flags) != len(items):
            return None
        for flag in flags:
            m = _DEFINE.match(flag.strip())
            if m:
                out.add(m.group(1))
    return out


def _analyze_python(doc: Document, result: Analysis, diags: list[Diag], dtype: str) -> None:
    roots = doc.roots
    err = _parse_error_diag(doc, roots, Severity.error, "this Python code")
    if err is not None:
        diags.append(err)
    facts = python_facts.extract(roots, doc.data)
    result.reference_header = reference_header(doc)

    def node_range(node: Node) -> Range:
        return doc.node_range(node.start_point, node.end_point)

    # Calls that build CUDA, and the strings they carry.
    used_literals: set[int] = set()
    call_defines = [_build_defines(call, facts) for call in facts.load_calls]
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
            name=next(iter(_literal_strings(call.argument("name", 0), facts)), None)
            if call.kind != "load_cuda"
            else next(iter(_literal_strings(call.keywords().get("name"), facts)), None),
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

    # Each string's text in the previous version of this document, to re-parse incrementally.
    previous: dict[tuple, bytes] = doc.cache.get("cuda_sources", {})
    current: dict[tuple, bytes] = {}
    all_facts = []
    for emb in result.embedded:
        key = (emb.role, emb.name, emb.call_index)
        all_facts.append(cuda_facts.facts_of_source(emb.data, previous.get(key)))
        current[key] = emb.data
    doc.cache["cuda_sources"] = current
    result.defines_model_new = facts.cls("ModelNew") is not None
    mod_classes = module_classes(facts)
    index = doc.index  # the outline is built later, maybe after the document has moved on
    embedded = result.embedded  # not `result`: a closure over it would make a reference cycle
    result.outline_builder = lambda: python_outline(index, facts, mod_classes, embedded, all_facts)

    def defines(emb: EmbeddedCuda) -> set[str] | None:
        if emb.call_index is None or emb.call_index >= len(call_defines):
            return None
        return call_defines[emb.call_index]

    sources = [
        Source(emb, f, defines(emb)) for emb, f in zip(result.embedded, all_facts, strict=True)
    ]
    launched: set[str] = set()
    for src in sources:
        launched |= src.facts.launched_names(src.flags)
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
        diags.extend(candidate_checks(doc, result, facts, mod_classes, sources, node_range, dtype))
