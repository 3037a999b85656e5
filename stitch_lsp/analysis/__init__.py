"""Static analysis of PyTorch modules and CUDA code with tree-sitter. Never imports torch.

Usage (the server and the `check` command build on exactly this)::

    from stitch_lsp.analysis import Document, analyze, check_paths, symbol_at

    doc = Document(uri, text, language_id, version)   # "python" | "cuda-cpp" | "cuda"
    doc = Document.from_path(path)                     # language from the suffix
    doc.apply_change((sl, sc, el, ec), new_text)       # one LSP change; None range = full text
    doc.roots                # the syntax: one root for CUDA; for Python one `module` root per
                             # run of top-level statements, so an edit re-parses only its run
    result = analyze(doc)                              # cached per document revision
    result.diagnostics       # list[Finding]: 1-based line/column, code "stitch.<id>"
    result.symbols           # outline: modules > methods, functions, kernels > launches
    result.modules           # nn.Module subclasses (name, bases, init/forward params, ranges)
    result.kernels           # __global__ / __device__ functions, also those in CUDA strings
    result.launches          # kernel<<<grid, block, smem, stream>>>(args)
    result.embedded          # CUDA strings in Python: virtual text + position mapper
    result.load_inline_calls # load_inline / cpp_extension.load / load_cuda calls
    result.get_inputs, result.get_init_inputs   # FunctionInfo or None
    symbol_at(result, line, char)   # LaunchInfo | KernelInfo | ModuleInfo | None (for hover)
    warm_up()                       # compile all queries now (CUDA's take ~0.3 s), e.g. at startup
    check_paths([Path(...)])        # CheckReport, as `stitch-lsp check` prints it

Coordinates: every range in an Analysis is 0-based `(start_line, start_char, end_line,
end_char)` in the document, characters in UTF-16 code units (LSP's default encoding), also for
code inside CUDA strings. Findings are 1-based (line, column) in the same units, so an LSP
diagnostic is `Position(line - 1, column - 1)`. `EmbeddedCuda.to_document` / `to_virtual`
convert between a CUDA string's own text and the Python file.

Diagnostics, `embedded` and `load_inline_calls` are computed by `analyze`; the outline
(`symbols`, `modules`, `functions`, `kernels`, `launches`, `get_inputs`) on first access, still
in the coordinates of the analysed version. A server that learns a file the analysis reads
(the reference named in the header) changed on disk clears `doc.cache` to re-analyse.

Queries live in `grammars/{python,cuda}/*.scm`; `stitch_lsp.analysis.rules.RULES` lists the
checks.
"""

from __future__ import annotations

from stitch_lsp.analysis.analyzer import analyze
from stitch_lsp.analysis.check import check_document, check_paths, iter_source_files
from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.embedded import EmbeddedCuda
from stitch_lsp.analysis.grammars import warm_up
from stitch_lsp.analysis.model import (
    Analysis,
    FunctionInfo,
    KernelInfo,
    LaunchInfo,
    LoadInlineCall,
    ModuleInfo,
    Symbol,
    range_contains,
)
from stitch_lsp.analysis.rules import RULES, Rule

__all__ = [
    "RULES",
    "Analysis",
    "Document",
    "EmbeddedCuda",
    "FunctionInfo",
    "KernelInfo",
    "LaunchInfo",
    "LoadInlineCall",
    "ModuleInfo",
    "Rule",
    "Symbol",
    "analyze",
    "check_document",
    "check_paths",
    "iter_source_files",
    "symbol_at",
    "warm_up",
]


def symbol_at(
    result: Analysis, line: int, char: int
) -> LaunchInfo | KernelInfo | ModuleInfo | None:
    """What a hover at a 0-based (line, UTF-16 char) is about: the innermost launch, else the
    innermost kernel or device function, else the nn.Module class."""

    def innermost(items):
        hits = [x for x in items if range_contains(x.range, line, char)]
        if not hits:
            return None
        return max(hits, key=lambda x: (x.range[0], x.range[1]))

    return innermost(result.launches) or innermost(result.kernels) or innermost(result.modules)
