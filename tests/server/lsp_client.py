"""A pytest-lsp client for end-to-end tests against the real `python -m stitch_lsp serve`.

Reuse it from any test folder:

    import pytest_lsp
    from tests.server.lsp_client import SERVER, StitchClient, initialize, open_file
    from tests.server.lsp_client import wait_for_diagnostics

    @pytest_lsp.fixture(config=SERVER)
    async def client(lsp_client: StitchClient):
        yield
        await lsp_client.shutdown_session()

    async def test_it(client: StitchClient, tmp_path):
        await initialize(client, tmp_path, settings={"debounceMs": 0})
        uri = await open_file(client, tmp_path / "m.py", "class ModelNew: ...")
        diags = await wait_for_diagnostics(client, uri)

(`tests/server/conftest.py` defines exactly that fixture as `client`.)

pytest-lsp's stock client cannot answer `workspace/applyEdit` or `client/registerCapability`;
this one can, records what it got (`applied_edits`, `registrations`, `statuses` for
`stitch/status`, `published` for every publishDiagnostics with its version), and can apply
edits to files on disk like an editor would (`apply_edits_to_disk=True`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

LANGUAGE_IDS = {".py": "python", ".cu": "cuda-cpp", ".cuh": "cuda-cpp"}


class StitchClient(LanguageClient):
    """The pytest-lsp client plus the editor behaviour our server relies on."""

    def __init__(self) -> None:
        super().__init__(converter_factory=default_converter)
        self.applied_edits: list[lsp.ApplyWorkspaceEditParams] = []
        self.registrations: list[lsp.Registration] = []
        self.statuses: list[dict[str, Any]] = []
        self.job_lists: list[list[dict[str, Any]]] = []
        self.published: list[lsp.PublishDiagnosticsParams] = []
        self.apply_edits_to_disk = False
        self._published_event = asyncio.Event()

    def on_published(self, params: lsp.PublishDiagnosticsParams) -> None:
        self.diagnostics[params.uri] = params.diagnostics
        self.published.append(params)
        self._published_event.set()

    async def next_publish(self, timeout: float) -> None:
        self._published_event.clear()
        await asyncio.wait_for(self._published_event.wait(), timeout)


def _publish(client: StitchClient, params: lsp.PublishDiagnosticsParams) -> None:
    client.on_published(params)


def _apply_edit(
    client: StitchClient, params: lsp.ApplyWorkspaceEditParams
) -> lsp.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)
    if client.apply_edits_to_disk:
        apply_workspace_edit(params.edit)
    return lsp.ApplyWorkspaceEditResult(applied=True)


def _register(client: StitchClient, params: lsp.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)


def _unregister(client: StitchClient, params: lsp.UnregistrationParams) -> None:
    gone = {u.id for u in params.unregisterations}
    client.registrations = [r for r in client.registrations if r.id not in gone]


def _status(client: StitchClient, params: Any) -> None:
    client.statuses.append(_plain(params))


def _jobs(client: StitchClient, params: Any) -> None:
    client.job_lists.append(_plain(params).get("jobs", []))


def make_client() -> StitchClient:
    client = StitchClient()
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _publish
    features[lsp.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[lsp.CLIENT_REGISTER_CAPABILITY] = _register
    features[lsp.CLIENT_UNREGISTER_CAPABILITY] = _unregister
    features["stitch/status"] = _status
    features["stitch/jobs"] = _jobs
    register_lsp_features(client, features)
    return client


SERVER_COMMAND = [sys.executable, "-m", "stitch_lsp", "serve"]
SERVER = ClientServerConfig(server_command=SERVER_COMMAND, client_factory=make_client)

REPO = Path(__file__).resolve().parents[2]
SERVER_WITH_FAKES = ClientServerConfig(
    server_command=SERVER_COMMAND,
    client_factory=make_client,
    server_env={
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "STITCH_EXTRA_FEATURES": "tests.server.fake_feature",
    },
)
"""The server plus `tests/server/fake_feature.py` (commands, lenses, actions, jobs)."""


def make_lens_client() -> StitchClient:
    """The shared test client, plus the lens refresh request VS Code answers."""
    client = make_client()

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(params: None) -> None:
        client.lens_refreshes = getattr(client, "lens_refreshes", 0) + 1

    return client


SERVER_NO_GPU = ClientServerConfig(
    server_command=SERVER_COMMAND,
    client_factory=make_lens_client,
    server_env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
)
"""The server with no GPU visible, and a client that counts code lens refreshes."""


async def initialize(
    client: StitchClient,
    root: Path,
    *,
    settings: dict[str, Any] | None = None,
    trusted: Any = True,
    configuration: dict[str, Any] | None = None,
    capabilities: str = "visual-studio-code",
    user_settings: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> lsp.InitializeResult:
    """initialize + initialized like VS Code would, then wait until the server is ready.

    `settings`/`trusted` go into initializationOptions (`trusted` as given, like VS Code's
    `true`/`false`; `trusted=None` sends none at all), and `user_settings` as `userSettings`
    (values the editor vouches come from user-level settings, like llmBaseUrl), and any other
    `options` as they are;
    `configuration` is what the client answers to workspace/configuration for the `stitch`
    section.
    """
    if configuration is not None:
        client.set_configuration(configuration, section="stitch")
    options = dict(options or {})
    if settings is not None:
        options["settings"] = settings
    if user_settings is not None:
        options["userSettings"] = user_settings
    if trusted is not None:
        options["trusted"] = trusted
    result = await client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities(capabilities),
            root_uri=root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options or None,
        )
    )
    await wait_until(lambda: any(s.get("state") == "idle" for s in client.statuses), 15)
    return result


async def open_file(
    client: StitchClient, path: Path, text: str | None = None, *, write: bool = True
) -> str:
    """didOpen `path` (writing `text` to disk first, like a saved file)."""
    if text is None:
        text = path.read_text()
    elif write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri,
                language_id=LANGUAGE_IDS.get(path.suffix, "plaintext"),
                version=1,
                text=text,
            )
        )
    )
    return uri


def edit(
    client: StitchClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    """One incremental didChange (0-based line/UTF-16 character positions)."""
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(
                        start=lsp.Position(line=start[0], character=start[1]),
                        end=lsp.Position(line=end[0], character=end[1]),
                    ),
                    text=text,
                )
            ],
        )
    )


async def wait_for_diagnostics(
    client: StitchClient, uri: str, *, version: int | None = None, timeout: float = 15.0
) -> list[lsp.Diagnostic]:
    """The latest publishDiagnostics seen for `uri` (at `version`, when given); waits for one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for p in reversed(client.published):
            if p.uri == uri and (version is None or p.version == version):
                return list(p.diagnostics)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise TimeoutError(f"no diagnostics for {uri} (version {version}) in {timeout} s")
        try:
            await client.next_publish(remaining)
        except asyncio.TimeoutError:
            continue


async def wait_until(predicate: Any, timeout: float = 10.0, step: float = 0.02) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(step)


async def debug_info(client: StitchClient) -> dict[str, Any]:
    """The server's hidden `stitch/debugInfo` request (torch check, timings, settings)."""
    return _plain(await client.protocol.send_request_async("stitch/debugInfo", {}))


def codes(diagnostics: list[lsp.Diagnostic]) -> list[str]:
    return [str(d.code) for d in diagnostics]


def apply_workspace_edit(edit: lsp.WorkspaceEdit) -> None:
    """Apply CreateFile + TextEdit operations to disk, as an editor would (never overwrite
    unless the edit asks to)."""
    from stitch_lsp.analysis.document import uri_to_path

    for change in edit.document_changes or []:
        if isinstance(change, lsp.CreateFile):
            path = uri_to_path(change.uri)
            assert path is not None
            overwrite = bool(change.options and change.options.overwrite)
            if path.exists() and not overwrite:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        elif isinstance(change, lsp.TextDocumentEdit):
            path = uri_to_path(change.text_document.uri)
            assert path is not None
            text = path.read_text() if path.exists() else ""
            for e in sorted(
                change.edits,
                key=lambda e: (e.range.start.line, e.range.start.character),
                reverse=True,
            ):
                text = _splice(text, e.range, e.new_text)
            path.write_text(text)
    for uri, edits in (edit.changes or {}).items():
        path = uri_to_path(uri)
        assert path is not None
        text = path.read_text() if path.exists() else ""
        for e in sorted(
            edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
        ):
            text = _splice(text, e.range, e.new_text)
        path.write_text(text)


def _splice(text: str, rng: lsp.Range, new: str) -> str:
    lines = text.splitlines(keepends=True)

    def offset(pos: lsp.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        line = lines[pos.line]
        units = 0
        for i, ch in enumerate(line):
            if units >= pos.character:
                return sum(len(x) for x in lines[: pos.line]) + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return sum(len(x) for x in lines[: pos.line]) + len(line.rstrip("\r\n"))

    return text[: offset(rng.start)] + new + text[offset(rng.end) :]


def _plain(value: Any) -> Any:
    """JSON-ish objects from pygls (attrs/namedtuple-like) -> plain dicts/lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [_plain(v) for v in value]
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if hasattr(value, "__attrs_attrs__"):
        return default_converter().unstructure(value)
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value
