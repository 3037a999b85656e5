"""The LSP handlers: text sync, diagnostics, symbols, hover, lenses, actions, files, settings.

Every handler is wrapped by `guarded`: an exception is logged once (window/logMessage) and the
request answers with an empty result, so one bad file or one broken feature never takes the
server down.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import sys
import time
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp
from pydantic import BaseModel, ValidationError
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams

from stitch_lsp.analysis.document import Document
from stitch_lsp.models.base import wire_dict
from stitch_lsp.server.app import StitchServer
from stitch_lsp.server.convert import from_range
from stitch_lsp.server.documents import OpenDocument
from stitch_lsp.server.registry import CommandSpec
from stitch_lsp.server.symbols import to_document_symbols
from stitch_lsp.server.watched_files import WatchedFiles

WATCHED_GLOBS = ("**/*.py", "**/*.cu", "**/*.cuh")
DEBUG_INFO_METHOD = "stitch/debugInfo"
MAX_SYMBOLS = 1000
"""Top-level outline entries answered: serialising 20,000 held the event loop for 0.6 s
(1,000 take about 35 ms)."""
CODE_ACTION_KINDS = [
    lsp.CodeActionKind.QuickFix,
    lsp.CodeActionKind.Refactor,
    lsp.CodeActionKind.Source,
]


def guarded(where: str, default: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Catch, log once, answer `default`: the server keeps serving after any feature bug."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(ls: StitchServer, *args: Any) -> Any:
                try:
                    return await fn(ls, *args)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    ls.report_error(where, exc)
                    return default

            return run_async

        @functools.wraps(fn)
        def run(ls: StitchServer, *args: Any) -> Any:
            try:
                return fn(ls, *args)
            except Exception as exc:
                ls.report_error(where, exc)
                return default

        return run

    return wrap


# ---- lifecycle -----------------------------------------------------------------------------------


@guarded("initialize")
def initialize(ls: StitchServer, params: lsp.InitializeParams) -> None:
    """Settings and the command list are known from here: expose the enabled commands, and
    lenses and code actions only when some feature provides them."""
    ls.set_initialization_options(params.initialization_options)
    unwatched = ls.lifeline.watch_editor(params.process_id)
    if unwatched is not None:
        ls.log(f"stitch-lsp: {unwatched}", lsp.MessageType.Warning)
    ls.startup_report = ls.apply_settings(None)
    for spec in ls.commands.values():
        if ls.command_enabled(spec.name):
            _expose_command(ls, spec)
    if ls.code_lens_providers:
        ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS)(code_lens)
    if ls.code_action_providers:
        ls.feature(
            lsp.TEXT_DOCUMENT_CODE_ACTION,
            lsp.CodeActionOptions(code_action_kinds=CODE_ACTION_KINDS),
        )(code_action)
    ls.initialized = True


@guarded("initialized")
async def initialized(ls: StitchServer, params: lsp.InitializedParams) -> None:
    """The client takes requests from here on: settings, watchers, warm-up, GPUs, then ready."""
    for err in ls.load_errors:
        ls.log(f"stitch-lsp: a feature failed to load: {err}", lsp.MessageType.Error)
    ls.show_settings_report(ls.startup_report)
    await _pull_configuration(ls)
    await _register_dynamic_capabilities(ls)
    try:
        await ls.warm_up()
    except Exception as exc:
        ls.report_error("warming up the analysis", exc)
    # Everything loaded so far lives as long as the server: keep it out of GC passes.
    gc.freeze()
    await ls.refresh_devices()
    gpus = ", ".join(ls.jobs.devices) or "none"
    mode = "trusted" if ls.trusted else "untrusted: analysis only, nothing is executed"
    enabled = [n for n in ls.commands if ls.command_enabled(n)]
    ls.log(
        f"stitch-lsp {ls.version} ready ({mode}); GPUs: {gpus}; "
        f"commands: {', '.join(enabled) or 'none'}"
    )
    if ls.torch_problem:
        ls.log(f"stitch-lsp: {ls.torch_problem}", lsp.MessageType.Warning)
        ready = "stitch-lsp ready (torch is missing: analysis and builds only)"
    elif ls.jobs.devices:
        ready = "stitch-lsp ready"
    else:
        ready = "stitch-lsp ready (no GPU: analysis only)"
    ls.send_status("idle", ready)
    if ls.watchdog is not None:
        ls.watchdog.ready()


@guarded("shutdown")
async def shutdown(ls: StitchServer, params: None) -> None:
    """Running jobs are stopped and a cluster left before the client ends the process."""
    ls.cancel_pending_publishes()
    await ls.jobs.shutdown()
    if ls.cluster.connected:
        await asyncio.get_running_loop().run_in_executor(ls.executor, ls.cluster.leave)


# ---- text sync -----------------------------------------------------------------------------------


@guarded("didOpen")
async def did_open(ls: StitchServer, params: lsp.DidOpenTextDocumentParams) -> None:
    """Published at once, not debounced: the user is looking at the file now."""
    td = params.text_document
    doc = Document(td.uri, td.text, td.language_id, td.version)
    ls.documents[td.uri] = OpenDocument(td.uri, doc, ls.settings)
    ls.cancel_publish(td.uri)
    await ls.publish(td.uri)  # open is not debounced: the user is looking at it now


@guarded("didChange")
def did_change(ls: StitchServer, params: lsp.DidChangeTextDocumentParams) -> None:
    """Edits go into our Document in place (it clamps ranges as the spec says); diagnostics
    follow debounced."""
    uri = params.text_document.uri
    state = ls.documents.get(uri)
    if state is None:
        return
    version = params.text_document.version
    t0, c0 = time.perf_counter(), time.thread_time()
    was_large = state.too_large
    try:
        for change in params.content_changes:
            # Over maxFileBytes nothing is parsed: the edit only updates the text, in place.
            apply = state.doc.apply_unparsed if state.too_large else state.doc.apply_change
            if isinstance(change, lsp.TextDocumentContentChangePartial):
                apply(from_range(change.range), change.text)
            else:
                apply(None, change.text)
    except Exception as exc:
        # An edit we could not apply: take pygls's copy of the text, the best one left
        # (it mishandles some out-of-range edits that our Document clamps per the spec).
        if uri in getattr(ls.protocol, "unsynced", ()):
            ls.report_error("applying an edit (the text may be out of date)", exc)
        else:
            ls.report_error("applying an edit (resynced the whole text)", exc)
            state.doc.apply_change(None, ls.workspace.get_text_document(uri).source)
    state.doc.version = version
    state.edit_ms = (time.perf_counter() - t0) * 1000.0
    state.edit_cpu_ms = (time.thread_time() - c0) * 1000.0
    ls.jobs.document_changed(uri, version)
    if was_large and state.too_large:
        return  # still only the one "too large" notice, already published: nothing to redo
    ls.schedule_publish(uri)


@guarded("didSave")
async def did_save(ls: StitchServer, params: lsp.DidSaveTextDocumentParams) -> None:
    """Saving publishes at once, and the features that act on save run."""
    uri = params.text_document.uri
    state = ls.documents.get(uri)
    if state is None:
        return
    ls.cancel_publish(uri)
    await ls.publish(uri)
    for listener in list(ls.save_listeners):
        await ls.call_provider("on save", listener, state, default=None)


@guarded("didClose")
def did_close(ls: StitchServer, params: lsp.DidCloseTextDocumentParams) -> None:
    """A closed file's diagnostics are cleared, so the editor keeps none of ours for it."""
    uri = params.text_document.uri
    ls.cancel_publish(uri)
    if ls.documents.pop(uri, None) is not None:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---- language features ---------------------------------------------------------------------------


@guarded("documentSymbol", default=[])
async def document_symbol(
    ls: StitchServer, params: lsp.DocumentSymbolParams
) -> list[lsp.DocumentSymbol] | list[dict[str, Any]]:
    """The outline, capped at MAX_SYMBOLS; a large file's is built off the event loop."""
    state = await _ready(ls, params.text_document.uri)
    if state is None:
        return []
    symbols = state.analysis.symbols
    if len(symbols) > MAX_SYMBOLS:  # 20,000 kernels in one string: no outline shows them
        symbols = symbols[:MAX_SYMBOLS]
    if not state.off_loop:
        return to_document_symbols(symbols)
    # A large file's outline as JSON data, built in the analysis thread: for a 2 MB file
    # building the LSP objects and converting them took 0.3 s.
    convert = ls.protocol._converter
    return await asyncio.get_running_loop().run_in_executor(
        ls.analysis_executor, lambda: convert.unstructure(to_document_symbols(symbols))
    )


@guarded("hover")
async def hover(ls: StitchServer, params: lsp.HoverParams) -> lsp.Hover | None:
    """Every hover provider's section in one hover, so features add to it independently."""
    state = await _ready(ls, params.text_document.uri)
    if state is None:
        return None
    sections: list[str] = []
    for name, provider in list(ls.hover_providers.items()):
        text = await ls.call_provider(
            f"hover:{name}", provider, state, params.position, default=None
        )
        if text:
            sections.append(text.strip())
    if not sections:
        return None
    return lsp.Hover(
        contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(sections))
    )


# Registered at initialize, and only when some feature provides lenses/actions.
@guarded("codeLens", default=[])
async def code_lens(ls: StitchServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    """Every provider's lenses, less those whose command is disabled here."""
    state = await _ready(ls, params.text_document.uri)
    if state is None:
        return []
    lenses: list[lsp.CodeLens] = []
    for name, provider in list(ls.code_lens_providers.items()):
        lenses.extend(await ls.call_provider(f"codeLens:{name}", provider, state, default=[]))
    return [x for x in lenses if x.command is None or _allowed(ls, x.command.command)]


@guarded("codeAction", default=[])
async def code_action(
    ls: StitchServer, params: lsp.CodeActionParams
) -> list[lsp.CodeAction | lsp.Command]:
    """Every provider's actions, less those whose command is disabled here."""
    state = await _ready(ls, params.text_document.uri)
    if state is None:
        return []
    actions: list[lsp.CodeAction | lsp.Command] = []
    for name, provider in list(ls.code_action_providers.items()):
        actions.extend(
            await ls.call_provider(f"codeAction:{name}", provider, state, params, default=[])
        )
    return [a for a in actions if _action_allowed(ls, a)]


# ---- workspace -----------------------------------------------------------------------------------


@guarded("didChangeConfiguration")
async def did_change_configuration(
    ls: StitchServer, params: lsp.DidChangeConfigurationParams
) -> None:
    """Settings are pulled when the client allows it, else taken from the notification."""
    if not await _pull_configuration(ls):
        pushed = params.settings.get("stitch") if isinstance(params.settings, dict) else None
        _use_settings(ls, pushed if isinstance(pushed, dict) else {})


@guarded("didChangeWatchedFiles")
def did_change_watched_files(ls: StitchServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    """Open documents whose dependencies changed on disk are analysed again."""
    # Recorded only: one coalesced pass follows (watched_files.py explains why).
    ls.store(WatchedFiles).add(ls, params.changes)


# ---- debugging -----------------------------------------------------------------------------------


@guarded("debugInfo")
def debug_info(ls: StitchServer, params: Any) -> dict[str, Any]:
    """Not advertised: what tests and benchmarks need to see inside the server.
    `{"resetLoop": true}` starts the loop figures afresh after this answer."""
    reset = params.get("resetLoop") if isinstance(params, dict) else None
    reset = reset if reset is not None else getattr(params, "resetLoop", False)
    answer = {
        "torchImported": "torch" in sys.modules,
        "trusted": ls.trusted,
        "devices": list(ls.jobs.devices),
        "commands": [n for n in ls.commands if ls.command_enabled(n)],
        "settings": ls.settings.model_dump(by_alias=True),
        "publishCount": ls.publish_count,
        "documents": [
            {
                "uri": uri,
                "version": d.version,
                "bytes": d.doc.size,
                "editMs": d.edit_ms,
                "editCpuMs": d.edit_cpu_ms,
                "analysisMs": d.analysis_ms,
                "analysisCpuMs": d.analysis_cpu_ms,
                "publishMs": d.publish_ms,
                "analysisCount": d.analysis_count,
                "tooLarge": d.too_large,
                "syntaxTrees": d.doc.tree_count,
            }
            for uri, d in ls.documents.items()
        ],
        "loop": ls.watchdog.figures() if ls.watchdog is not None else None,
        "watchedFiles": ls.store(WatchedFiles).figures(),
        "pendingHandlers": len(ls.protocol._request_futures),
        "time": time.time(),
    }
    if reset is True and ls.watchdog is not None:
        ls.watchdog.reset()
    return answer


# Registered on every server, in this order; lenses and code actions follow at initialize.
_HANDLERS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (lsp.INITIALIZE, initialize),
    (lsp.INITIALIZED, initialized),
    (lsp.SHUTDOWN, shutdown),
    (lsp.TEXT_DOCUMENT_DID_OPEN, did_open),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, did_change),
    (lsp.TEXT_DOCUMENT_DID_SAVE, did_save),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, did_close),
    (lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL, document_symbol),
    (lsp.TEXT_DOCUMENT_HOVER, hover),
    (lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, did_change_configuration),
    (lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, did_change_watched_files),
    (DEBUG_INFO_METHOD, debug_info),
)


def register_handlers(server: StitchServer) -> None:
    """The handlers live at module level, so that each can be read and tested alone; the
    table keeps the set (and order) of methods the server answers in one place."""
    for method, handler in _HANDLERS:
        server.feature(method)(handler)


# ---- helpers -------------------------------------------------------------------------------------


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (a pydantic error runs to many)."""
    lines = str(exc).strip().splitlines()
    more = f" (+{len(lines) - 1} more lines in the log)" if len(lines) > 1 else ""
    return (lines[0][:300] if lines else type(exc).__name__) + more


async def _ready(ls: StitchServer, uri: str) -> OpenDocument | None:
    """The open document with its analysis current (computed off the loop when it is large)."""
    state = ls.documents.get(uri)
    if state is not None:
        await state.ensure_analysis(ls.analysis_executor)
    return state


def _allowed(ls: StitchServer, command: str) -> bool:
    spec = ls.commands.get(command)
    return spec is None or ls.command_enabled(command)


def _action_allowed(ls: StitchServer, action: lsp.CodeAction | lsp.Command) -> bool:
    if isinstance(action, lsp.Command):
        return _allowed(ls, action.command)
    return action.command is None or _allowed(ls, action.command.command)


def _expose_command(ls: StitchServer, spec: CommandSpec) -> None:
    # pygls injects the server when the first parameter is named `ls`; `*args` takes the
    # command's JSON arguments as they came.
    async def command(ls: StitchServer, *args: Any) -> Any:
        try:
            result = await spec.handler(ls, *args)
            # Typed results travel in camelCase, like every LSP payload.
            return wire_dict(result) if isinstance(result, BaseModel) else result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, ValueError) and not isinstance(exc, ValidationError):
                # the commands' own word for arguments they cannot use
                raise JsonRpcInvalidParams(f"{spec.name}: {one_line(exc)}") from None
            # The traceback goes to the log; the editor gets one line.
            ls.report_error(f"command {spec.name}", exc)
            raise JsonRpcInternalError(
                f"{spec.name} failed: {type(exc).__name__}: {one_line(exc)}"
            ) from None

    ls.command(spec.name)(command)


def _use_settings(ls: StitchServer, values: dict[str, Any]) -> None:
    old = ls.settings
    ls.show_settings_report(ls.apply_settings(values))
    if ls.settings == old:
        return
    old_device = old.device
    for uri, d in ls.documents.items():
        d.use_settings(ls.settings)
        ls.schedule_publish(uri, delay_ms=0)
    moved = ls.settings.device != old_device or ls.settings.cluster != old.cluster
    if moved and ls.initialized:
        asyncio.get_running_loop().create_task(ls.refresh_devices())
    for listener in list(ls.settings_listeners):
        asyncio.get_running_loop().create_task(
            ls.call_provider("settings listener", listener, ls, default=None)
        )


async def _pull_configuration(ls: StitchServer) -> bool:
    """Read the `stitch` section with workspace/configuration; False when the client cannot."""
    caps = ls.client_capabilities.workspace
    if caps is None or not caps.configuration:
        return False
    try:
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(
                lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="stitch")])
            ),
            10,
        )
    except Exception as exc:
        ls.log(
            f"stitch-lsp: could not read settings from the editor: {exc}", lsp.MessageType.Warning
        )
        return False
    values = result[0] if result else None
    _use_settings(ls, values if isinstance(values, dict) else {})
    return True


async def _register_dynamic_capabilities(ls: StitchServer) -> None:
    """File watchers and settings notifications, where the client allows dynamic registration."""
    ws = ls.client_capabilities.workspace
    registrations: list[lsp.Registration] = []
    if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
        registrations.append(
            lsp.Registration(
                id="stitch-watched-files",
                method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[lsp.FileSystemWatcher(glob_pattern=g) for g in WATCHED_GLOBS]
                ),
            )
        )
    if ws and ws.did_change_configuration and ws.did_change_configuration.dynamic_registration:
        registrations.append(
            lsp.Registration(
                id="stitch-configuration",
                method=lsp.WORKSPACE_DID_CHANGE_CONFIGURATION,
                register_options=lsp.DidChangeConfigurationRegistrationOptions(section="stitch"),
            )
        )
    if not registrations:
        return
    try:
        await asyncio.wait_for(
            ls.client_register_capability_async(
                lsp.RegistrationParams(registrations=registrations)
            ),
            10,
        )
    except Exception as exc:
        ls.log(
            f"stitch-lsp: the editor refused file watchers/settings notifications: {exc}",
            lsp.MessageType.Warning,
        )
