"""'Export standalone copy': the same kernels as a `load_inline` file that needs no stitch-lsp.

Offered as a source action on files that import `stitch_lsp.runtime` (what the generators write).
The copy goes next to the file as `<stem>_standalone.py` (then `_standalone_2.py`, ...), created
through a WorkspaceEdit that never overwrites anything, and is opened. It runs nothing, so it is
offered in untrusted workspaces too.

Command: `stitch.exportStandalone` [uri] or [{uri}].
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import uri_to_path

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

EXPORT = "stitch.exportStandalone"
EXPORT_TITLE = "Export standalone copy"
SUFFIX = "_standalone"


def register(server: StitchServer) -> None:
    def actions(doc: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        from stitch_lsp.export.standalone import uses_runtime

        if doc.path is None or doc.path.suffix != ".py" or doc.too_large:
            return []
        if not uses_runtime(doc.text):
            return []
        cmd = lsp.Command(title=EXPORT_TITLE, command=EXPORT, arguments=[doc.uri])
        return [lsp.CodeAction(title=EXPORT_TITLE, kind=lsp.CodeActionKind.Source, command=cmd)]

    async def export(ls: StitchServer, *args: Any) -> dict[str, Any]:
        return await export_standalone_copy(ls, _uri_arg(args))

    server.register_code_action_provider("export", actions)
    server.register_command(EXPORT, export, executes_code=False)


async def export_standalone_copy(ls: StitchServer, uri: str) -> dict[str, Any]:
    from stitch_lsp.candidate_files import free_name
    from stitch_lsp.export.standalone import ExportError, export_standalone

    path = uri_to_path(uri)
    if path is None or path.suffix != ".py":
        return _fail(ls, "export works on a .py file")
    from stitch_lsp.files import unreadable_reason
    from stitch_lsp.server.features.common import read_disk_text

    doc = ls.documents.get(uri)
    try:
        text = doc.text if doc is not None else await read_disk_text(ls, path)
    except OSError as exc:
        return _fail(ls, f"no standalone copy: {unreadable_reason(exc)}")
    try:
        copy = await asyncio.to_thread(export_standalone, text)
    except ExportError as exc:
        return _fail(ls, f"no standalone copy of {path.name}: {exc}")
    from stitch_lsp.server.scopes import OutsideWorkspace, generated_file_folder

    try:
        folder = generated_file_folder(path, path, ls.workspace_roots() or [path.parent])
    except OutsideWorkspace as exc:
        return _fail(ls, str(exc))
    taken = {p.name for d in ls.documents.values() if (p := d.path) is not None}
    out = free_name(path, taken, folder, suffix=SUFFIX)
    out_uri, problem = await create_new_file(ls, out, copy, label="stitch: standalone copy")
    if out_uri is None:
        return _fail(ls, f"could not create {out.name}: {problem}")
    ls.window_show_message(
        lsp.ShowMessageParams(
            type=lsp.MessageType.Info,
            message=f"stitch: wrote {out.name}: the same kernels, built with load_inline "
            "(slower to build), no stitch-lsp needed",
        )
    )
    await _show(ls, out_uri)
    return {"ok": True, "output": out_uri}


async def create_new_file(
    ls: StitchServer, path: Path, text: str, *, label: str
) -> tuple[str | None, str]:
    """Create `path` with `text` through the editor (never overwriting), or on disk with
    O_EXCL when the client cannot create files. (uri, '') or (None, why)."""
    from stitch_lsp.candidate_files import write_new

    uri = path.as_uri()
    caps = ls.client_capabilities
    we = caps.workspace.workspace_edit if caps and caps.workspace else None
    can_create = bool(
        we
        and we.document_changes
        and lsp.ResourceOperationKind.Create in (we.resource_operations or [])
    )
    if not can_create:
        try:
            write_new(path, text)
        except OSError as exc:
            return None, str(exc)
        return uri, ""
    start = lsp.Position(line=0, character=0)
    edit = lsp.WorkspaceEdit(
        document_changes=[
            lsp.CreateFile(
                uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=False)
            ),
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                edits=[lsp.TextEdit(range=lsp.Range(start=start, end=start), new_text=text)],
            ),
        ]
    )
    try:
        res = await asyncio.wait_for(
            ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label)),
            30,
        )
    except Exception as exc:
        return None, f"the editor did not apply the edit ({exc})"
    if not res.applied:
        return None, res.failure_reason or "the editor refused the edit"
    return uri, ""


async def _show(ls: StitchServer, uri: str) -> None:
    caps = ls.client_capabilities
    window = caps.window if caps else None
    if not (window and window.show_document and window.show_document.support):
        return
    try:
        await asyncio.wait_for(
            ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, take_focus=True)), 10
        )
    except Exception:
        return


def _fail(ls: StitchServer, message: str) -> dict[str, Any]:
    ls.window_show_message(
        lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"stitch: {message}")
    )
    return {"ok": False, "message": message}


def _uri_arg(args: tuple[Any, ...]) -> str:
    if args and isinstance(args[0], dict) and "uri" in args[0]:
        return str(args[0]["uri"])
    if args and isinstance(args[0], str):
        return args[0]
    raise ValueError(f"{EXPORT} wants [uri] or [{{uri}}]")
