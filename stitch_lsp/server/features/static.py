"""Static analysis in the editor: the `stitch` diagnostics and the static hover section."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from stitch_lsp.analysis.rules import rule
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.server.hover import hover_markdown

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

SOURCE = "stitch"
MAX_DIAGNOSTICS = 500
"""Findings sent per document: 20,000 kernels in one string gave 20,000 findings, and turning
them into LSP diagnostics and JSON held the event loop for a second on every publish."""


def register(server: StitchServer) -> None:
    server.register_diagnostic_source(SOURCE, static_diagnostics)
    server.register_hover_provider("static", static_hover)


def static_diagnostics(doc: OpenDocument) -> list[Finding]:
    # Oversized files come back with one `stitch.file-too-large` note and nothing parsed.
    found = list(doc.analysis.diagnostics)
    if len(found) <= MAX_DIAGNOSTICS:
        return found
    severity = {"error": 0, "warning": 1, "information": 2, "hint": 3}
    found.sort(key=lambda f: (severity.get(f.severity.value, 4), f.line, f.column))
    shown = sorted(found[:MAX_DIAGNOSTICS], key=lambda f: (f.line, f.column))
    r = rule("too-many-findings")
    note = Finding(
        path=found[0].path,
        line=1,
        severity=Severity.information,
        code=r.code,
        url=r.url,
        message=f"{len(found)} findings in this file; the {MAX_DIAGNOSTICS} most severe are "
        "shown (run `stitch-lsp check` on it for all of them)",
    )
    return [note, *shown]


def static_hover(doc: OpenDocument, position: lsp.Position) -> str | None:
    return hover_markdown(doc.analysis, position.line, position.character)
