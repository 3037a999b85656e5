"""Finding (1-based, what `check`/`verify`/`profile` print) <-> LSP Diagnostic (0-based).

All off-by-one decisions live here so that no feature module converts positions on its own.
Columns are UTF-16 code units on both sides, as the analysis layer and LSP use them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp

from stitch_lsp.models.findings import Finding, Severity

_TO_LSP = {
    Severity.error: lsp.DiagnosticSeverity.Error,
    Severity.warning: lsp.DiagnosticSeverity.Warning,
    Severity.information: lsp.DiagnosticSeverity.Information,
    Severity.hint: lsp.DiagnosticSeverity.Hint,
}
_FROM_LSP = {v: k for k, v in _TO_LSP.items()}

LineLength = Callable[[int], int | None]
"""0-based line -> its length in UTF-16 units (None when the line does not exist)."""


def finding_to_diagnostic(
    finding: Finding, line_length: LineLength | None = None
) -> lsp.Diagnostic:
    """A Finding without an end is underlined to the end of its line (when lines are known)."""
    start = lsp.Position(line=finding.line - 1, character=finding.column - 1)
    if finding.end_line is not None:
        end_col = finding.end_column if finding.end_column is not None else finding.column
        end = lsp.Position(line=finding.end_line - 1, character=max(end_col - 1, 0))
    else:
        length = line_length(start.line) if line_length else None
        end_char = length if length is not None and length > start.character else start.character
        end = lsp.Position(line=start.line, character=end_char)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return lsp.Diagnostic(
        range=lsp.Range(start=start, end=end),
        message=finding.message,
        severity=_TO_LSP[finding.severity],
        code=finding.code,
        source=finding.source,
        code_description=lsp.CodeDescription(href=finding.url) if finding.url else None,
    )


def diagnostic_to_finding(diagnostic: lsp.Diagnostic, path: str | Path) -> Finding:
    """The reverse, for tests and for commands that report what the editor showed."""
    r = diagnostic.range
    severity = _FROM_LSP.get(diagnostic.severity or lsp.DiagnosticSeverity.Error, Severity.error)
    return Finding(
        path=str(path),
        line=r.start.line + 1,
        column=r.start.character + 1,
        end_line=r.end.line + 1,
        end_column=r.end.character + 1,
        severity=severity,
        code=str(diagnostic.code) if diagnostic.code is not None else "",
        message=diagnostic.message,
        source=diagnostic.source or "stitch",
        url=diagnostic.code_description.href if diagnostic.code_description else None,
    )


def to_range(r: tuple[int, int, int, int]) -> lsp.Range:
    """An analysis-layer range (0-based, UTF-16) as an LSP Range."""
    return lsp.Range(
        start=lsp.Position(line=r[0], character=r[1]), end=lsp.Position(line=r[2], character=r[3])
    )


def from_range(r: lsp.Range) -> tuple[int, int, int, int]:
    return (r.start.line, r.start.character, r.end.line, r.end.character)
