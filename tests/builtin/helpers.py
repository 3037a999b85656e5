"""Shared helpers: write a problem, generate its candidate in-process, import both."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from stitch_lsp.models.codegen import BuiltinCandidate


def write_problem(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def generate_for(path: Path) -> BuiltinCandidate:
    from stitch_lsp.compiler.worker.generate import generate

    return generate(path, path.name)


def import_path(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def serious_findings(path: Path) -> list[str]:
    """The static checks' errors and warnings on a candidate file, as `line: code message`."""
    from stitch_lsp.analysis.check import check_paths
    from stitch_lsp.config import Settings
    from stitch_lsp.models.findings import Severity

    report = check_paths([path], Settings())
    return [
        f"{d.line}: {d.code} {d.message}"
        for d in report.diagnostics
        if d.severity in (Severity.error, Severity.warning)
    ]
