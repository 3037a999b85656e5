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


def unsaved(doc: OpenDocument, path: Path) -> bool:
    """Whether the editor's text differs from the file on disk (workers run what is on disk)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace") != doc.text
    except OSError:
        return True


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
