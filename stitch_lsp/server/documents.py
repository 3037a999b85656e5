"""The server's view of one open document: text + incremental tree, its latest analysis, and
the diagnostics that background jobs pushed for it.

Analysis runs on the event loop thread on purpose: it takes milliseconds even on big files
(measured in BENCHMARKS.md), and keeping it on one thread means an edit can never race an
analysis of the same tree. Files above Settings.max_file_bytes are never parsed: the analysis
only reports their size.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.model import Analysis
from stitch_lsp.config import Settings
from stitch_lsp.models.findings import Finding


def text_hash(text: str) -> str:
    """The content key under which job results and profiles of a document are remembered."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class PushedDiagnostics:
    """Diagnostics a job published for one source. `version` set: dropped when the text moves on."""

    diagnostics: list[lsp.Diagnostic | Finding]
    version: int | None = None


@dataclass
class OpenDocument:
    uri: str
    doc: Document
    settings: Settings
    pushed: dict[str, PushedDiagnostics] = field(default_factory=dict)
    analysis_ms: float | None = None  # the last analysis of this document (wall time)
    analysis_cpu_ms: float | None = None  # ...and the CPU time it took (immune to a busy host)
    edit_ms: float | None = None  # applying the last didChange (incremental re-parse), wall
    edit_cpu_ms: float | None = None
    publish_ms: float | None = None  # the last publish: analysis + every source + sending
    analysis_count: int = 0
    _analysis: Analysis | None = None
    _analysis_revision: int = -1

    @property
    def version(self) -> int:
        return self.doc.version

    @property
    def language_id(self) -> str:
        return self.doc.language_id

    @property
    def text(self) -> str:
        return self.doc.text

    @property
    def path(self) -> Path | None:
        return self.doc.path

    @property
    def too_large(self) -> bool:
        """Over Settings.max_file_bytes: the analysis then only says so, without parsing."""
        return self.doc.size > self.settings.max_file_bytes

    @property
    def analysis(self) -> Analysis:
        """The analysis of the current text, recomputed once per revision."""
        if self._analysis is None or self._analysis_revision != self.doc.revision:
            from stitch_lsp.analysis import analyze

            t0, c0 = time.perf_counter(), time.thread_time()
            self._analysis = analyze(self.doc, self.settings)
            self.analysis_ms = (time.perf_counter() - t0) * 1000.0
            self.analysis_cpu_ms = (time.thread_time() - c0) * 1000.0
            self.analysis_count += 1
            self._analysis_revision = self.doc.revision
        return self._analysis

    def use_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.invalidate()  # e.g. maxFileBytes changed what the analysis may do

    def invalidate(self) -> None:
        """Forget cached analysis although the text is the same: a file it reads (the
        reference) changed on disk."""
        self._analysis = None
        self.doc.cache.clear()

    def line_length(self, line: int) -> int | None:
        """Length of a 0-based line in UTF-16 units, for underlining a Finding to line end."""
        lines = self.doc.index.starts
        if line < 0 or line >= len(lines):
            return None
        start = lines[line]
        end = lines[line + 1] - 1 if line + 1 < len(lines) else len(self.doc.data)
        raw = self.doc.data[start:end].rstrip(b"\r")
        if raw.isascii():
            return len(raw)
        return len(raw.decode("utf-8", "replace").encode("utf-16-le")) // 2

    def reference_path(self) -> Path | None:
        """The reference file named by the `# stitch-lsp: reference=` header, resolved."""
        header = self.analysis.reference_header
        if not header:
            return None
        ref = Path(header)
        if not ref.is_absolute():
            if self.path is None:
                return None
            ref = self.path.parent / ref
        return Path(_normalize(ref))

    def dependencies(self) -> set[str]:
        """Files (as `path_key`s) whose change on disk can change this file's results."""
        deps: set[str] = set()
        ref = self.reference_path()
        if ref is not None:
            deps.add(path_key(ref))
        if self.path is not None:
            for call in self.analysis.load_inline_calls:
                for src in call.sources:
                    p = Path(src)
                    deps.add(path_key(p if p.is_absolute() else self.path.parent / p))
        return deps

    def drop_stale_pushed(self) -> bool:
        """Forget pushed diagnostics tied to an older version; True when any were dropped."""
        stale = [
            k for k, p in self.pushed.items() if p.version is not None and p.version != self.version
        ]
        for k in stale:
            del self.pushed[k]
        return bool(stale)


def _normalize(p: Path) -> str:
    import os

    return os.path.normpath(str(p))


def path_key(path: Path | str) -> str:
    """How paths are compared between watched-file events, reference headers and load()
    sources: absolute, normalised, symlinks resolved (the editor may name either side)."""
    import os

    return os.path.realpath(Path(path).absolute())
