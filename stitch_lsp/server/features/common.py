"""What every feature module needs once: lenses, argument parsing, failure messages, the
unsaved-file check and the on-save debounce."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types as lsp

from stitch_lsp.models.commands import CommandResult, UriArgs, WireModel, parse_arguments
from stitch_lsp.server.documents import text_hash

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

A = TypeVar("A", bound=WireModel)


def at_line(line: int) -> lsp.Range:
    pos = lsp.Position(line=max(line, 0), character=0)
    return lsp.Range(start=pos, end=pos)


def lens(row: int, title: str, command: str, arguments: Sequence[Any]) -> lsp.CodeLens:
    """A code lens at the start of 0-based `row` that runs `command`."""
    cmd = lsp.Command(title=title, command=command, arguments=list(arguments))
    return lsp.CodeLens(range=at_line(row), command=cmd)


def arguments(model: type[A], args: Sequence[Any], command: str) -> A:
    """A command's arguments, `[{...}]` or positional; a clear error for anything else."""
    return parse_arguments(model, args, command)


def uri_argument(args: Sequence[Any], command: str) -> str:
    """`[uri]` or `[{uri}]`."""
    return arguments(UriArgs, args, command).uri


def fail(
    ls: StitchServer,
    message: str,
    *,
    quiet: bool = False,
    prefix: str = "stitch",
    state: str | None = None,
) -> CommandResult:
    """Tell the user (a warning pop-up, or only a log line for background runs) and answer."""
    if quiet:
        ls.log(f"{prefix}: {message}", lsp.MessageType.Warning)
    else:
        ls.window_show_message(
            lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"{prefix}: {message}")
        )
    return CommandResult(ok=False, message=message, state=state)


async def read_disk_text(ls: StitchServer, path: Path, max_bytes: int | None = None) -> str:
    """A workspace file's text, read in a worker thread through `files.read_text`: a regular
    file after its links are followed, at most `max_bytes` (default: stitch.maxFileBytes).
    Raises OSError (UnreadableFile for a FIFO, a device, a file too large) with a clear
    message: see `files.unreadable_reason`."""
    from stitch_lsp.files import read_text

    cap = ls.settings.max_file_bytes if max_bytes is None else max_bytes
    return await asyncio.to_thread(read_text, path, cap)


async def unsaved(ls: StitchServer, doc: OpenDocument, path: Path) -> bool:
    """Whether the editor's text differs from the file on disk (workers run what is on disk);
    a file that cannot be read counts as unsaved."""
    try:
        return await read_disk_text(ls, path) != doc.text
    except OSError:
        return True


class DiskTexts:
    """Files' texts by (path, inode, mtime, size): a lens or hover that compares against a
    file on disk reads it once per change, never whole (a cap) and never a FIFO."""

    def __init__(self, size: int = 32) -> None:
        self._texts: dict[str, tuple[tuple[int, int, int], str | None]] = {}
        self._size = size

    def get(self, path: Path, max_bytes: int) -> str | None:
        import os

        from stitch_lsp.files import read_text

        try:
            st = os.stat(path)
        except OSError:
            return None
        key, stamp = str(path), (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._texts.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            text: str | None = read_text(path, max_bytes) if st.st_size <= max_bytes else None
        except OSError:
            text = None
        if len(self._texts) >= self._size:
            self._texts.pop(next(iter(self._texts)))
        self._texts[key] = (stamp, text)
        return text


class AfterSave:
    """Runs a background action once saves of a document stop for the debounce delay; a newer
    save replaces the pending one (used by verifyOnSave and profileOnSave)."""

    def __init__(self, server: StitchServer) -> None:
        self.server = server
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def schedule(self, doc: OpenDocument, action: Callable[[], Awaitable[Any]]) -> None:
        old = self._tasks.pop(doc.uri, None)
        if old is not None and not old.done():
            old.cancel()
        version = doc.version
        server = self.server

        async def later() -> None:
            await asyncio.sleep(server.settings.debounce_ms / 1000.0)
            if doc.version == version and server.documents.get(doc.uri) is doc:
                await action()

        self._tasks[doc.uri] = asyncio.get_running_loop().create_task(later())


class VerifiedSpeedups:
    """Speedups a verify measured, by document and text: the profile hover and lenses show them
    beside a profile of the same text."""

    def __init__(self) -> None:
        self._by_text: dict[tuple[str, str], float] = {}

    def record(self, uri: str, text: str, speedup: float) -> None:
        self._by_text[(uri, text_hash(text))] = speedup

    def get(self, uri: str, text: str) -> float | None:
        return self._by_text.get((uri, text_hash(text)))

    def values(self) -> list[float]:
        return list(self._by_text.values())
