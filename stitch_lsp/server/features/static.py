"""Static analysis in the editor: the `stitch` diagnostics and the static hover section."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from stitch_lsp.models.findings import Finding
from stitch_lsp.server.hover import hover_markdown

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

SOURCE = "stitch"


def register(server: StitchServer) -> None:
    server.register_diagnostic_source(SOURCE, static_diagnostics)
    server.register_hover_provider("static", static_hover)


def static_diagnostics(doc: OpenDocument) -> list[Finding]:
    # Oversized files come back with one `stitch.file-too-large` note and nothing parsed.
    return list(doc.analysis.diagnostics)


def static_hover(doc: OpenDocument, position: lsp.Position) -> str | None:
    return hover_markdown(doc.analysis, position.line, position.character)
