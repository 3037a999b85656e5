"""Which classes of a candidate file are the solution, what binds its compiled CUDA, and the
checks that need that context (the checks themselves live in `python_checks`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node

from stitch_lsp.analysis.cuda_facts import CudaFacts
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.grammars import find_all
from stitch_lsp.analysis.model import Analysis
from stitch_lsp.analysis.python_checks import (
    CandidateContext,
    check_candidate,
    check_file_wide,
    extension_ctor,
    reference_is_low_precision,
)
from stitch_lsp.analysis.python_facts import PyClass, PyFacts
from stitch_lsp.analysis.syntax import ancestors, text
from stitch_lsp.analysis.torch_ops import HEAVY_OPS, LIGHT_OPS
from stitch_lsp.models.findings import Severity

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


def candidate_checks(
    doc: Document,
    result: Analysis,
    facts: PyFacts,
    mod_classes: list[PyClass],
    all_facts: list[CudaFacts],
    node_range: Callable[[Node], Range],
) -> list[Diag]:
    """Anti-cheating diagnostics of a file that defines ModelNew or names its reference."""
    candidates, reference_names = _solution_classes(facts, mod_classes)
    handles, extension_kernels = _extension_bindings(doc, result, facts, all_facts, candidates)
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
    check_file_wide(ctx, doc.roots, doc.data)
    _aten_in_sources(ctx, result, extension_kernels)
    if ctx.reference_fp32:
        _cuda_downcasts(ctx, result)
    return ctx.diags


def _solution_classes(facts: PyFacts, mod_classes: list[PyClass]) -> tuple[list[PyClass], set[str]]:
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
        init = queue.pop().methods.get("__init__")
        if init is None:
            continue
        called = set(_CALLED_NAME.findall(text(init)))
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


# fp32 -> 16-bit conversions inside a kernel.
_CUDA_DOWNCASTS = (b"__float2half", b"__float2bfloat16", b"__floats2half2", b"__float22half2")


def _cuda_downcasts(ctx: CandidateContext, result: Analysis) -> None:
    for emb in result.embedded:
        if emb.role == "string":
            continue
        hits = sorted(find_all(emb.data, _CUDA_DOWNCASTS))
        if hits:
            end = emb.data.find(b"(", hits[0])
            rng = emb.virtual_bytes_to_document(hits[0], end if end > 0 else hits[0] + 12)
            ctx.diags.append(
                Diag(
                    rng,
                    Severity.warning,
                    "downcast",
                    "the kernel converts fp32 values to 16-bit: the reference is fp32, so this "
                    "computes something less precise",
                )
            )
