"""Pydantic records that cross process boundaries (server, workers, CLI), one module per area."""

from stitch_lsp.models.findings import CheckReport, Finding, Severity

__all__ = ["CheckReport", "Finding", "Severity"]
