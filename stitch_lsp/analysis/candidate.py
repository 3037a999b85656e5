"""Which classes of a candidate file are the solution, what binds its compiled CUDA, and the
checks that need that context (the checks themselves live in `python_checks`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from stitch_lsp.analysis.cuda_facts import CudaFacts
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.extension_checks import Source, check_extension
from stitch_lsp.analysis.model import Analysis
from stitch_lsp.analysis.names import Resolver
from stitch_lsp.analysis.python_checks import (
    CandidateContext,
    check_candidate,
    emit_torch_hits,
    extension_ctor,
)
from stitch_lsp.analysis.python_facts import PyClass, PyFacts
from stitch_lsp.analysis.python_tricks import (
    check_call_count,
    check_cpu_compute,
    check_event_joins,
    check_file_wide,
    check_memoisation,
)
from stitch_lsp.analysis.reference import (
    ReferenceInfo,
    dtype_of,
    header_reference,
    reference_info,
)
from stitch_lsp.analysis.syntax import ancestors, text

_CALLED_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def reference_of(
    doc: Document, result: Analysis, facts: PyFacts, resolver: Resolver
) -> ReferenceInfo | None:
    """The reference: `Model` in this file, else the file the header names."""
    info = reference_info(facts, resolver)
    if info is not None:
        return info
    if result.reference_header and doc.path is not None:
        try:
            path = (doc.path.parent / result.reference_header).resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
            return None
        return header_reference(path)
    return None


def decide_dtype(setting: str, reference: ReferenceInfo | None, facts: PyFacts) -> tuple[str, bool]:
    """(dtype of the problem, whether it was only assumed). An explicit setting wins, then the
    reference's inputs, then this file's own get_inputs; fp32 when nothing says otherwise."""
    if setting != "auto":
        return setting, False
    if reference is not None and reference.dtype is not None:
        return reference.dtype, False
    gi = facts.functions.get("get_inputs")
    if gi is not None:
        return dtype_of(text(gi)) or "float32", False
    return "float32", True


def candidate_checks(
    doc: Document,
    result: Analysis,
    facts: PyFacts,
    mod_classes: list[PyClass],
    sources: list[Source],
    node_range: Callable[[Node], Range],
    dtype_setting: str = "auto",
) -> list[Diag]:
    """Anti-cheating diagnostics of a file that defines ModelNew or names its reference."""
    all_facts = [s.facts for s in sources]
    resolver = Resolver(doc.roots, facts)
    candidates, reference_names = _solution_classes(facts, mod_classes, resolver)
    handles, extension_kernels = _extension_bindings(doc, result, facts, all_facts, candidates)
    reference = reference_of(doc, result, facts, resolver)
    dtype, assumed = decide_dtype(dtype_setting, reference, facts)
    ctx = CandidateContext(
        facts=facts,
        to_range=node_range,
        candidates=candidates,
        reference_names=reference_names,
        reference_fp32=dtype == "float32",
        extension_handles=handles,
        extension_kernels=extension_kernels,
        resolver=resolver,
        reference=reference,
        dtype_assumed=assumed,
    )
    check_candidate(ctx)
    check_file_wide(ctx, doc.roots, doc.data)
    check_memoisation(ctx)
    check_call_count(ctx)
    check_event_joins(ctx)
    check_cpu_compute(ctx)
    check_extension(ctx, [s for s in sources if s.emb.role != "string"])
    emit_torch_hits(ctx)
    return ctx.diags


def _solution_classes(
    facts: PyFacts, mod_classes: list[PyClass], resolver: Resolver
) -> tuple[list[PyClass], set[str]]:
    """The classes that make up the solution, and the names of the reference.

    With ModelNew: ModelNew and the file's own modules it builds in __init__ (transitively).
    With only a header: every nn.Module of the file except one called Model."""
    mod_names = {c.name for c in mod_classes}
    reference_names = {"Model"}
    model_new = facts.cls("ModelNew")
    if model_new is None:
        candidates = [c for c in mod_classes if c.name not in reference_names]
        return candidates, reference_names - {c.name for c in candidates}
    candidates = [model_new]
    queue = [model_new]
    while queue:
        cls = queue.pop()
        init = cls.methods.get("__init__")
        if init is None:
            continue
        called = set(_CALLED_NAME.findall(text(init)))
        # `Block = MyBlock; self.b = Block()`: aliases of this file's module classes too.
        for values in resolver.self_attribute_values(cls.node).values():
            for value, _ in values:
                ref = resolver.resolve(value)
                if ref is not None and ref.node is not None and ref.node.type == "class_definition":
                    called.add(text(ref.node.child_by_field_name("name")))
        for name in sorted((mod_names - reference_names) & called):
            helper = facts.cls(name)
            if helper is not None and helper not in candidates:
                candidates.append(helper)
                queue.append(helper)
    return candidates, reference_names - {c.name for c in candidates}


_LOADERS = ("load_inline", "load", "load_cuda")
_JIT_DECORATOR = re.compile(r"@\s*(triton\.jit|cuda\.jit|numba\.cuda\.jit)")


def _extension_bindings(
    doc: Document,
    result: Analysis,
    facts: PyFacts,
    all_facts: list[CudaFacts],
    candidates: list[PyClass],
) -> tuple[set[str], bool]:
    """What names bind compiled CUDA (`ext`, `self.ext`, a factory `_get_ext`, a cupy kernel,
    a triton function), and whether that CUDA holds real kernels (or cannot be seen)."""
    handles: set[str] = set()
    factories: set[str] = set()
    for lic, call in zip(result.load_inline_calls, facts.load_calls, strict=True):
        if lic.target:
            handles.add(lic.target)
        fn = next((a for a in ancestors(call.node) if a.type == "function_definition"), None)
        if fn is not None and any(fn == f for f in facts.functions.values()):
            factories.add(text(fn.child_by_field_name("name")))
    handles |= factories

    # A prebuilt custom-op library, sources we cannot read, or launched kernels count.
    real = b"torch.ops.load_library" in doc.data
    for lic in result.load_inline_calls:
        if lic.declined or lic.kind == "load":
            real = True
        launched = set().union(*(all_facts[j].launched_names() for j in lic.embedded))
        for j in lic.embedded:
            f = all_facts[j]
            if f.library_calls or any(
                k.kind == "kernel" and (k.name in launched or k.extern_c) for k in f.kernels
            ):
                real = True

    def bind(name: str, callee: str) -> None:
        nonlocal real
        if callee in factories or extension_ctor(callee):
            handles.add(name)
            if not callee.endswith(_LOADERS) and callee not in factories:
                real = True  # cupy RawKernel, ctypes.CDLL, ...: compiled elsewhere

    for name, values in facts.assignments.items():
        if values[-1].type == "call":
            bind(name, text(values[-1].child_by_field_name("function")))
    for fname, fn in facts.functions.items():
        parent = fn.parent
        if (
            parent is not None
            and parent.type == "decorated_definition"
            and _JIT_DECORATOR.search(text(parent))
        ):
            handles.add(fname)
            real = True
    for name, values in facts.assignments.items():  # ext2 = ext
        if values[-1].type == "identifier" and text(values[-1]) in handles:
            handles.add(name)
    for cls in candidates:
        init = cls.methods.get("__init__")
        if init is None:
            continue
        for m in re.finditer(r"(self\.\w+)\s*=\s*([\w.]+)\s*\(", text(init)):
            bind(m.group(1), m.group(2))
        # self.ext = ext: the extension kept on the module.
        for m in re.finditer(r"(self\.\w+)\s*=\s*([A-Za-z_]\w*)\s*$", text(init), re.MULTILINE):
            if m.group(2) in handles:
                handles.add(m.group(1))
    return handles, real
