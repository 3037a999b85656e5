"""`check_paths`: run the static checks over files and folders, as the CLI and the Verifier do."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from stitch_lsp.analysis.analyzer import analyze
from stitch_lsp.analysis.document import SUFFIX_LANGUAGE, Document
from stitch_lsp.analysis.rules import rule
from stitch_lsp.config import Settings
from stitch_lsp.files import UnreadableFile, display_path
from stitch_lsp.models.findings import CheckReport, Finding, Severity

SOURCE_SUFFIXES = frozenset({".py", ".cu", ".cuh"})
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "build", "dist"})


def iter_source_files(root: Path) -> Iterator[Path]:
    """*.py, *.cu, *.cuh under a folder, skipping virtualenvs, node_modules and hidden folders."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in SKIP_DIRS
            and not (Path(dirpath, d) / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            if Path(name).suffix.lower() in SOURCE_SUFFIXES:
                yield Path(dirpath, name)


def _missing(path: Path, why: str, severity: Severity = Severity.error) -> Finding:
    r = rule("file-missing")
    return Finding(path=str(path), line=1, severity=severity, code=r.code, message=why, url=r.url)


def _unreadable(path: Path, exc: OSError) -> Finding:
    """A file that was not read: not a regular file (a warning: a FIFO in a folder is not the
    user's code), too large (information, as the editor says it), or an OS error."""
    shown = display_path(path)
    if isinstance(exc, UnreadableFile):
        if "limit" in exc.reason:
            r = rule("file-too-large")
            return Finding(
                path=str(path),
                line=1,
                severity=Severity.information,
                code=r.code,
                message=f"stitch-lsp skipped this file: it {exc.reason}",
                url=r.url,
            )
        return _missing(path, f"{shown} {exc.reason}", Severity.warning)
    return _missing(path, f"{shown}: cannot read ({exc.strerror or exc})")


def check_document(doc: Document, settings: Settings | None = None) -> list[Finding]:
    return list(analyze(doc, settings).diagnostics)


def check_paths(paths: Iterable[Path | str], settings: Settings | None = None) -> CheckReport:
    """Findings for every file (folders are walked). A missing or unreadable path is reported
    as a `stitch.file-missing` error, never raised."""
    report = CheckReport()
    max_bytes = (settings or Settings()).max_file_bytes
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = list(iter_source_files(path))
        elif path.exists() or path.is_symlink():
            files = [path]
        else:
            report.diagnostics.append(
                _missing(path, f"{display_path(path)}: no such file or folder")
            )
            continue
        for file in files:
            language = SUFFIX_LANGUAGE.get(file.suffix.lower())
            if language is None and file.suffix.lower() not in SOURCE_SUFFIXES:
                language = "python" if file.suffix == "" else None
            try:
                doc = Document.from_path(file, language, max_bytes)
            except OSError as exc:  # a FIFO, a device, too large, a symlink loop, no access
                report.diagnostics.append(_unreadable(file, exc))
                continue
            for finding in analyze(doc, settings).diagnostics:
                report.diagnostics.append(finding.model_copy(update={"path": str(file)}))
    return report


def files_checked(paths: Iterable[Path | str]) -> int:
    n = 0
    for given in paths:
        p = Path(given)
        if p.is_dir():
            n += sum(1 for _ in iter_source_files(p))
        elif p.exists():
            n += 1
    return n
