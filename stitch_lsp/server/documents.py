"""The server's view of one open document: text + incremental tree, its latest analysis, and
the diagnostics that background jobs pushed for it.

Analysis of an ordinary file runs on the event loop thread on purpose: it takes milliseconds
(measured in BENCHMARKS.md), and keeping it on one thread means an edit can never race an
analysis of the same tree. A file of `OFF_LOOP_BYTES` or more is analysed in a worker thread on
a snapshot of its text instead (a 2 MB file took 0.6 s), with the parse's time budget, while
the loop keeps answering; its edits only record the text. Files above Settings.max_file_bytes
are never parsed: the analysis only reports their size. The reference a header names is read
in a worker thread too (`ensure_analysis`), so the loop never waits for a disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import Document
from stitch_lsp.analysis.model import Analysis
from stitch_lsp.config import Settings
from stitch_lsp.models.findings import Finding

OFF_LOOP_BYTES = 200_000
"""Documents at least this large are analysed off the event loop (see the module docstring)."""


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
    _analysis_settings: Settings | None = None
    _running: asyncio.Future[tuple[Analysis, float, float]] | None = None

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
    def off_loop(self) -> bool:
        """Analysed in a worker thread: large, but not so large that nothing is parsed."""
        return self.doc.size >= OFF_LOOP_BYTES and not self.too_large

    def _fresh(self) -> bool:
        return (
            self._analysis is not None
            and self._analysis_revision == self.doc.revision
            and self._analysis_settings is self.settings
        )

    @property
    def analysis(self) -> Analysis:
        """The analysis of the current text, recomputed once per revision.

        For a document analysed off the loop this never computes: it is the latest analysis
        `ensure_analysis` finished (maybe of an older text), or an empty one until then."""
        if self._fresh():
            assert self._analysis is not None
            return self._analysis
        if self.off_loop:
            if self._analysis is None:
                from stitch_lsp.analysis.model import Analysis as Empty

                lang = self.doc.grammar or "other"
                empty = Empty(uri=self.uri, language=lang, version=self.version)
                empty.skipped = "the analysis of this large file is still running"
                return empty
            return self._analysis
        analysis, ms, cpu_ms = _timed_analysis(self.doc, self.settings)
        self._store(analysis, ms, cpu_ms, self.doc.revision, self.settings)
        return analysis

    def _store(
        self, analysis: Analysis, ms: float, cpu_ms: float, revision: int, settings: Settings
    ) -> None:
        self._analysis = analysis
        self.analysis_ms, self.analysis_cpu_ms = ms, cpu_ms
        self.analysis_count += 1
        self._analysis_revision = revision
        self._analysis_settings = settings

    async def ensure_analysis(self, executor: Executor) -> Analysis:
        """Make `analysis` current without blocking the event loop on a disk or a large parse:
        the reference the header names is read in `executor`, and a large document is analysed
        there on a snapshot (one analysis at a time per document; edits made meanwhile get the
        next one)."""
        if self._fresh():
            return self.analysis
        loop = asyncio.get_running_loop()
        await self._warm_reference(loop, executor)
        for _ in range(3):  # a user who keeps typing gets a slightly stale result, not a wait
            if self._fresh() or not self.off_loop:
                break
            if self._running is None:
                revision, settings = self.doc.revision, self.settings
                snapshot = self.doc.snapshot()
                running = loop.run_in_executor(executor, _timed_analysis, snapshot, settings, True)
                self._running = running

                def finished(
                    fut: asyncio.Future[Any],
                    revision: int = revision,
                    settings: Settings = settings,
                ) -> None:
                    if self._running is fut:
                        self._running = None
                    if not fut.cancelled() and fut.exception() is None:
                        # Kept even when the text moved on: a stale outline beats none.
                        analysis, ms, cpu_ms = fut.result()
                        self._store(analysis, ms, cpu_ms, revision, settings)

                running.add_done_callback(finished)
            await asyncio.shield(self._running)
        return self.analysis

    async def _warm_reference(self, loop: asyncio.AbstractEventLoop, executor: Executor) -> None:
        if self.path is None or self.doc.grammar != "python" or self.too_large:
            return
        from stitch_lsp.analysis.analyzer import reference_header
        from stitch_lsp.analysis.reference import warm_reference

        header = reference_header(self.doc)
        if header:
            await loop.run_in_executor(executor, warm_reference, self.path.parent, header)

    def use_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.invalidate()  # e.g. maxFileBytes changed what the analysis may do

    def invalidate(self) -> None:
        """Forget cached analysis although the text is the same: a file it reads (the
        reference) changed on disk."""
        self._analysis_revision = -1  # the old result stays shown until the new one is ready
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


def _timed_analysis(
    doc: Document, settings: Settings, with_outline: bool = False
) -> tuple[Analysis, float, float]:
    """(analysis, wall ms, CPU ms). In a worker thread the outline is built there too, so the
    loop never builds it for a large file."""
    from stitch_lsp.analysis import analyze
    from stitch_lsp.analysis.grammars import ParseTimeout

    t0, c0 = time.perf_counter(), time.thread_time()
    if with_outline and not doc.binary:
        with contextlib.suppress(ParseTimeout):  # analyze reports it
            doc.split_runs()
    analysis = analyze(doc, settings)
    if with_outline:
        _ = analysis.outline
    return analysis, (time.perf_counter() - t0) * 1000.0, (time.thread_time() - c0) * 1000.0


def _normalize(p: Path) -> str:
    import os

    return os.path.normpath(str(p))


def path_key(path: Path | str) -> str:
    """How paths are compared between watched-file events, reference headers and load()
    sources: absolute, normalised, symlinks resolved (the editor may name either side)."""
    import os

    return os.path.realpath(Path(path).absolute())
