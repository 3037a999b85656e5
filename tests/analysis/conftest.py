"""Helpers for the analysis tests: analyse a snippet and pick diagnostics by code."""

from __future__ import annotations

import textwrap
from pathlib import Path

from stitch_lsp.analysis import Analysis, Document, analyze
from stitch_lsp.models.findings import Finding

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]


def run(source: str, language: str = "python", uri: str = "file:///tmp/candidate.py") -> Analysis:
    return analyze(Document(uri, textwrap.dedent(source), language))


def codes(result: Analysis, code: str | None = None) -> list[Finding]:
    return [d for d in result.diagnostics if code is None or d.code == f"stitch.{code}"]
