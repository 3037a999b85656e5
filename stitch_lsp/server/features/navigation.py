"""Go to definition and find references between Python and the CUDA it carries.

In a generated file (or any load_inline file) the Python side calls into CUDA by name:
`lib.stitch_fused_0(...)` (a `load_cuda` library's launcher), `ext.forward(...)` (a
`load_inline` module's function); inside the CUDA, launchers start kernels with `<<<...>>>`.
Definition follows that chain from the Python call to the `__global__` the call starts (to the
launcher itself when it launches no kernel of ours, e.g. a cuBLAS call), and from a launch or
call inside the CUDA to the function it names. References go back: from a kernel to its launch
sites and to the Python calls of the launchers that start it.

Names are matched within one document (a `.py` file with its CUDA strings, or a `.cu` file),
using the analysis layer's kernels, launches and symbols, which are already in the document's
coordinates (embedded CUDA mapped back to its string).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from stitch_lsp.analysis.model import Analysis, Range, Symbol, range_contains
from stitch_lsp.candidate_header import is_header_line

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `recv.name(` in Python: the receiver is a dotted name (ext, self.ext, lib, module.sub).
_PY_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.([A-Za-z_]\w*)\s*\(")
# Receivers that are never a CUDA extension: a call through them names something else.
_NOT_EXTENSIONS = frozenset({"self", "cls", "torch", "F", "nn", "np", "numpy", "math", "os", "sys"})


@dataclass(frozen=True, slots=True)
class CudaFunction:
    name: str
    kind: str  # kernel | device_function | function (host)
    range: Range
    selection_range: Range


def _flatten(symbols: list[Symbol]) -> list[Symbol]:
    out: list[Symbol] = []
    for s in symbols:
        out.append(s)
        out.extend(_flatten(s.children))
    return out


def _in_cuda(a: Analysis, is_cuda_file: bool, line: int, char: int) -> bool:
    return is_cuda_file or a.embedded_at(line, char) is not None


def cuda_functions(a: Analysis, is_cuda_file: bool) -> list[CudaFunction]:
    """Every function defined in the document's CUDA (kernels, device and host functions)."""
    out: list[CudaFunction] = []
    for s in _flatten(a.symbols):
        if s.kind not in ("kernel", "device_function", "function"):
            continue
        line, char = s.selection_range[0], s.selection_range[1]
        if _in_cuda(a, is_cuda_file, line, char):
            out.append(CudaFunction(s.name, s.kind, s.range, s.selection_range))
    return out


class Navigator:
    """Definitions and references in one analysed document."""

    def __init__(self, text: str, analysis: Analysis, is_cuda_file: bool) -> None:
        self.lines = text.splitlines()
        self.a = analysis
        self.cuda_file = is_cuda_file
        self.functions = cuda_functions(analysis, is_cuda_file)

    # ---- positions ------------------------------------------------------------------------

    def _line(self, n: int) -> str:
        return self.lines[n] if 0 <= n < len(self.lines) else ""

    @staticmethod
    def _to_index(line: str, utf16: int) -> int:
        units = 0
        for i, ch in enumerate(line):
            if units >= utf16:
                return i
            units += 2 if ord(ch) > 0xFFFF else 1
        return len(line)

    @staticmethod
    def _to_utf16(line: str, index: int) -> int:
        return len(line[:index].encode("utf-16-le")) // 2

    def _span(self, line: int, start: int, end: int) -> Range:
        text = self._line(line)
        return (line, self._to_utf16(text, start), line, self._to_utf16(text, end))

    def word_at(self, line: int, char: int) -> tuple[str, int] | None:
        """The identifier under the cursor and its start index in the line."""
        text = self._line(line)
        i = self._to_index(text, char)
        for m in _WORD.finditer(text):
            if m.start() <= i <= m.end():
                return m.group(), m.start()
        return None

    # ---- lookups ----------------------------------------------------------------------------

    def named(self, name: str, kinds: tuple[str, ...] | None = None) -> list[CudaFunction]:
        return [f for f in self.functions if f.name == name and (kinds is None or f.kind in kinds)]

    def kernels_launched_by(self, fn: CudaFunction) -> list[CudaFunction]:
        inside = [
            launch.kernel
            for launch in self.a.launches
            if range_contains(fn.range, launch.range[0], launch.range[1])
        ]
        return [k for n in dict.fromkeys(inside) for k in self.named(n, ("kernel",))]

    def python_calls(self) -> list[tuple[str, str, Range]]:
        """(receiver, name, range of name) of every `recv.name(` outside the CUDA strings."""
        out: list[tuple[str, str, Range]] = []
        if self.cuda_file:
            return out
        for n, text in enumerate(self.lines):
            if text.lstrip().startswith("#"):
                continue
            for m in _PY_CALL.finditer(text):
                if m.group(1) in _NOT_EXTENSIONS:
                    continue
                rng = self._span(n, m.start(2), m.end(2))
                if self.a.embedded_at(rng[0], rng[1]) is not None:
                    continue
                out.append((m.group(1), m.group(2), rng))
        return out

    def cuda_uses(self, name: str) -> list[Range]:
        """`name(` and `name<<<` (and `name<T><<<`) inside the document's CUDA."""
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\s*(?:<[^<>;]*>\s*)?(?:<<<|\()")
        out: list[Range] = []
        for n, text in enumerate(self.lines):
            if name not in text:
                continue
            comment = text.find("//")
            for m in pattern.finditer(text):
                if 0 <= comment < m.start():
                    break  # the rest of the line is a comment
                rng = self._span(n, m.start(), m.start() + len(name))
                if _in_cuda(self.a, self.cuda_file, rng[0], rng[1]):
                    out.append(rng)
        return out

    # ---- LSP answers ------------------------------------------------------------------------

    def definition(self, line: int, char: int) -> list[Range]:
        hit = self.word_at(line, char)
        if hit is None:
            return []
        name, start = hit
        if _in_cuda(self.a, self.cuda_file, line, char):
            return [f.selection_range for f in self.named(name)]
        text = self._line(line)
        for _, called, rng in self.python_calls():
            if rng[0] == line and called == name and self._to_index(text, rng[1]) == start:
                return self._targets_of_python_call(name)
        return []

    def _targets_of_python_call(self, name: str) -> list[Range]:
        out: list[Range] = []
        for fn in self.named(name, ("kernel", "function")):
            if fn.kind == "kernel":
                out.append(fn.selection_range)
                continue
            kernels = self.kernels_launched_by(fn)
            out.extend([k.selection_range for k in kernels] or [fn.selection_range])
        return list(dict.fromkeys(out))

    def references(self, line: int, char: int, include_declaration: bool) -> list[Range]:
        hit = self.word_at(line, char)
        if hit is None:
            return []
        name = hit[0]
        targets = self.named(name)
        if not targets:
            return []
        out: list[Range] = []
        if include_declaration:
            out.extend(f.selection_range for f in targets)
        declared = {f.selection_range for f in targets}
        out.extend(r for r in self.cuda_uses(name) if r not in declared)
        # Python calls of this function, or of a launcher that starts this kernel.
        callers = {name}
        if any(f.kind == "kernel" for f in targets):
            callers |= {
                f.name
                for f in self.functions
                if f.kind == "function" and any(k.name == name for k in self.kernels_launched_by(f))
            }
        out.extend(rng for _, called, rng in self.python_calls() if called in callers)
        return list(dict.fromkeys(out))

    def header_reference(self, line: int, path: Path | None) -> Path | None:
        """On the `# stitch-lsp: reference=` line: the reference file it names."""
        if path is None or not is_header_line(self._line(line)) or not self.a.reference_header:
            return None
        ref = Path(self.a.reference_header)
        ref = ref if ref.is_absolute() else path.parent / ref
        return ref if ref.is_file() else None


def navigator(doc: OpenDocument) -> Navigator | None:
    if doc.too_large:
        return None
    a = doc.analysis
    if a is None or a.language not in ("python", "cuda"):
        return None
    return Navigator(doc.text, a, a.language == "cuda")


def _location(uri: str, rng: Range) -> lsp.Location:
    return lsp.Location(
        uri=uri,
        range=lsp.Range(
            start=lsp.Position(line=rng[0], character=rng[1]),
            end=lsp.Position(line=rng[2], character=rng[3]),
        ),
    )


def register(server: StitchServer) -> None:
    from stitch_lsp.server.handlers import guarded

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    @guarded("definition", default=None)
    def definition(ls: StitchServer, params: lsp.DefinitionParams) -> list[lsp.Location] | None:
        doc = ls.documents.get(params.text_document.uri)
        nav = navigator(doc) if doc is not None else None
        if doc is None or nav is None:
            return None
        pos = params.position
        ref = nav.header_reference(pos.line, doc.path)
        if ref is not None:
            return [_location(ref.as_uri(), (0, 0, 0, 0))]
        found = nav.definition(pos.line, pos.character)
        return [_location(doc.uri, r) for r in found] or None

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    @guarded("references", default=None)
    def references(ls: StitchServer, params: lsp.ReferenceParams) -> list[lsp.Location] | None:
        doc = ls.documents.get(params.text_document.uri)
        nav = navigator(doc) if doc is not None else None
        if doc is None or nav is None:
            return None
        pos = params.position
        found = nav.references(pos.line, pos.character, params.context.include_declaration)
        return [_location(doc.uri, r) for r in found] or None
