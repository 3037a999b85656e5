"""Map a line of a CUDA source string back to the Python document that holds it.

Compilers see the string (maybe assembled from several literals); users see the `.py` file. We
find every string literal of the document inside the compiled text, and a compiled line that
falls in a literal maps to the document line where that part of the literal is written.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class _Piece:
    start: int  # 0-based line of the compiled text where the literal starts
    lines: int  # number of lines the literal's value spans
    doc_line: int  # 1-based document line of the literal's first character of value
    exact: bool  # one value line per document line (triple-quoted, no escaped newlines)


class SourceMap:
    """Compiled source string (1-based lines) -> document lines (1-based)."""

    def __init__(self, document: str, compiled: str) -> None:
        self.pieces: list[_Piece] = []
        try:
            tree = ast.parse(document)
        except SyntaxError:
            return
        taken: list[tuple[int, int]] = []
        literals = [
            (n, n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "\n" in n.value
        ]
        # Longest first, so a small literal does not claim a span a big one owns.
        for node, value in sorted(literals, key=lambda nv: -len(nv[1])):
            pos = compiled.find(value)
            if pos < 0:
                continue
            end = pos + len(value)
            if any(pos < b and a < end for a, b in taken):
                continue  # (character ranges: concatenated literals may share a line)
            taken.append((pos, end))
            start = compiled.count("\n", 0, pos)
            exact = node.end_lineno is not None and node.end_lineno - node.lineno == value.count(
                "\n"
            )
            self.pieces.append(_Piece(start, value.count("\n") + 1, node.lineno, exact))

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def to_document(self, line: int) -> int | None:
        """Document line for a 1-based compiled line, or None if it is not from this document."""
        zero = line - 1
        for p in self.pieces:
            if p.start <= zero < p.start + p.lines:
                return p.doc_line + (zero - p.start if p.exact else 0)
        return None

    def first_line(self) -> int | None:
        return min((p.doc_line for p in self.pieces), default=None)


def map_line(document_path: str | Path, compiled: str, line: int | None) -> int:
    """Best document line for a compiler message; line 1 when nothing better is known."""
    try:
        text = Path(document_path).read_text(encoding="utf-8")
    except OSError:
        return max(1, line or 1)
    if Path(document_path).suffix in {".cu", ".cuh", ".cuda"}:
        return max(1, line or 1)
    sm = SourceMap(text, compiled)
    if line is not None:
        mapped = sm.to_document(line)
        if mapped is not None:
            return mapped
    return sm.first_line() or 1


def definition_line(document: str, name: str) -> int:
    """Line of `class name` / `def name` in a Python document (1 when absent)."""
    try:
        tree = ast.parse(document)
    except SyntaxError:
        return 1
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return node.lineno
    return 1
