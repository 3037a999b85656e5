"""workspace/didChangeWatchedFiles, coalesced: a storm of changes costs one pass, off the hot path.

A `git checkout` or a `pip install` into the workspace's `.venv` sends tens of thousands of
changes at once. Handled one by one (each compared with every open document's dependencies,
each resolved with `realpath` on the loop) 10,000 changes with 30 open documents held the event
loop for 44 s. So the handler only records the changes; after `COALESCE_S` one pass handles them
all: changes under virtualenvs and build folders are dropped at once, the rest are deduplicated
by URI, their paths are resolved in a worker thread, and each affected open document is
re-analysed once. The pass yields to the loop every `CHUNK` changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from stitch_lsp.server.documents import path_key

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer

COALESCE_S = 0.2
CHUNK = 500
IGNORED_DIRS = frozenset(
    {
        ".venv",
        "venv",
        "env",
        ".env",
        "site-packages",
        "dist-packages",
        "node_modules",
        "build",
        "dist",
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
    }
)
"""Folders whose files are never a reference or a CUDA source the user edits."""


def ignored(uri: str) -> bool:
    """Whether a changed file lies under a virtualenv, a package cache or a build folder."""
    folders = uri.split("/")[:-1]
    return not IGNORED_DIRS.isdisjoint(folders) or any(f.endswith(".egg-info") for f in folders)


@dataclass
class WatchedFiles:
    """The pending changes and what the passes so far did (stitch/debugInfo shows it)."""

    pending: dict[str, lsp.FileChangeType] = field(default_factory=dict)
    received: int = 0
    dropped: int = 0
    """Changes ignored at once: under IGNORED_DIRS, or of a file open in the editor."""
    passes: int = 0
    reanalysed: int = 0
    _task: asyncio.Task[None] | None = None

    def add(self, server: StitchServer, changes: Sequence[lsp.FileEvent]) -> None:
        """Record changes (cheap: no disk, no analysis); a pass follows within COALESCE_S."""
        documents = server.documents
        pending = self.pending
        self.received += len(changes)
        for change in changes:
            uri = change.uri
            if uri in documents or ignored(uri):
                self.dropped += 1  # an open file's buffer is the truth, not the disk
                continue
            pending[uri] = change.type  # the last change of a file wins
        if pending and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run(server))

    def figures(self) -> dict[str, int]:
        return {
            "received": self.received,
            "dropped": self.dropped,
            "pending": len(self.pending),
            "passes": self.passes,
            "reanalysed": self.reanalysed,
        }

    async def _run(self, server: StitchServer) -> None:
        while self.pending:
            await asyncio.sleep(COALESCE_S)
            batch, self.pending = self.pending, {}
            try:
                await self._handle(server, batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                server.report_error("handling watched-file changes", exc)

    async def _handle(self, server: StitchServer, batch: dict[str, lsp.FileChangeType]) -> None:
        resolved = await asyncio.to_thread(_resolve, list(batch.items()))
        users = await _dependents(server)
        affected: set[str] = set()
        deleted: list[Path] = []
        dropped = 0
        listeners = list(server.file_change_listeners)
        for i, (path, key, kind) in enumerate(resolved):
            if i and i % CHUNK == 0:
                await asyncio.sleep(0)
            dropped += server.jobs.invalidate_path(key)
            using = users.get(key, ())
            affected.update(using)
            if kind == lsp.FileChangeType.Deleted and using:
                deleted.append(path)
            for listener in listeners:
                await server.call_provider(
                    "file change listener", listener, key, kind, default=None
                )
        for path in deleted[:5]:
            server.log(f"stitch-lsp: {path} was deleted; open file(s) use it (as their "
                       "reference or CUDA source)")  # fmt: skip
        if dropped:
            server.log(
                f"stitch-lsp: {len(resolved)} watched file(s) changed; dropped {dropped} "
                "cached result(s)"
            )
        for uri in affected:
            doc = server.documents.get(uri)
            if doc is not None:
                doc.invalidate()
                server.schedule_publish(uri, delay_ms=0)
                self.reanalysed += 1
        self.passes += 1


def _resolve(
    changes: Iterable[tuple[str, lsp.FileChangeType]],
) -> list[tuple[Path, str, lsp.FileChangeType]]:
    """(path, path_key, type) of each file change; in a worker thread: `realpath` asks the
    disk once per path component."""
    from stitch_lsp.analysis.document import uri_to_path

    out: list[tuple[Path, str, lsp.FileChangeType]] = []
    for uri, kind in changes:
        path = uri_to_path(uri)
        if path is None:
            continue
        with contextlib.suppress(OSError, ValueError):
            out.append((path, path_key(path), kind))
    return out


async def _dependents(server: StitchServer) -> dict[str, list[str]]:
    """Which open documents read each file (their reference, their load() sources), by
    path_key: computed once per pass, not once per change."""
    users: dict[str, list[str]] = {}
    for uri, doc in list(server.documents.items()):
        try:
            deps = doc.dependencies()
        except Exception:
            continue
        for dep in deps:
            users.setdefault(dep, []).append(uri)
        await asyncio.sleep(0)
    return users
