"""The shapes of what feature modules plug into the server.

Each provider gets the server's view of one open document (`OpenDocument`) and returns LSP
objects (or `Finding`s for diagnostics). Providers may be plain functions or coroutines; one
that raises is logged once and skipped, so a broken feature never hides the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from lsprotocol import types as lsp

from stitch_lsp.models.findings import Finding

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]

DiagnosticSource = Callable[["OpenDocument"], MaybeAwaitable[Sequence[lsp.Diagnostic | Finding]]]
"""(doc) -> diagnostics of one named source; recomputed on every publish of that document."""

HoverProvider = Callable[["OpenDocument", lsp.Position], MaybeAwaitable[str | None]]
"""(doc, position) -> a Markdown section, or None. Sections are joined in registration order."""

CodeLensProvider = Callable[["OpenDocument"], MaybeAwaitable[Sequence[lsp.CodeLens]]]

CodeActionProvider = Callable[
    ["OpenDocument", lsp.CodeActionParams], MaybeAwaitable[Sequence[lsp.CodeAction | lsp.Command]]
]

CommandHandler = Callable[..., Awaitable[Any]]
"""async (server, *arguments) -> JSON-able result, for `workspace/executeCommand`."""

FileChangeListener = Callable[[str, lsp.FileChangeType], MaybeAwaitable[None]]
"""(path, change type) for a watched file that is not open in the editor."""

SettingsListener = Callable[["StitchServer"], MaybeAwaitable[None]]
SaveListener = Callable[["OpenDocument"], MaybeAwaitable[None]]


@dataclass(frozen=True)
class CommandSpec:
    """A command and whether it runs code (builds, executes, profiles, calls an LLM).

    Commands that run code are neither registered nor advertised in an untrusted workspace.
    """

    name: str
    handler: CommandHandler
    executes_code: bool = True
