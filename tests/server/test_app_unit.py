"""StitchServer in-process: diagnostics merging, pushed diagnostics, settings, error logging."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lsprotocol import types as lsp

from stitch_lsp.analysis import Document
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.server.app import StitchServer, create_server
from stitch_lsp.server.documents import OpenDocument

URI = "file:///tmp/stitch-unit/m.py"


class Recorder:
    def __init__(self, server: StitchServer) -> None:
        self.published: list[lsp.PublishDiagnosticsParams] = []
        self.logs: list[str] = []
        server.text_document_publish_diagnostics = self.published.append  # type: ignore[method-assign]
        server.window_log_message = lambda p: self.logs.append(p.message)  # type: ignore[method-assign]


@pytest.fixture
def server() -> StitchServer:
    return create_server(devices=[], feature_modules=["stitch_lsp.server.features.static"])


def _open(server: StitchServer, text: str, version: int = 1) -> OpenDocument:
    doc = OpenDocument(URI, Document(URI, text, "python", version), server.settings)
    server.documents[URI] = doc
    return doc


def _finding(line: int, code: str, source: str) -> Finding:
    return Finding(
        path="m.py", line=line, severity=Severity.warning, code=code, message=code, source=source
    )


async def test_pushed_diagnostics_merge_and_drop_when_the_text_moves_on(
    server: StitchServer,
) -> None:
    rec = Recorder(server)
    doc = _open(server, "x = 1\ny = 2\n")
    server.set_diagnostics(URI, "ncu", [_finding(2, "FPInstructions", "ncu")], version=1)
    server.set_diagnostics(URI, "verify", [_finding(1, "stitch.verify", "verify")])
    await asyncio.sleep(0.05)
    last = rec.published[-1]
    assert last.version == 1
    assert sorted(str(d.code) for d in last.diagnostics) == ["FPInstructions", "stitch.verify"]
    ncu = next(d for d in last.diagnostics if d.code == "FPInstructions")
    assert ncu.source == "ncu" and ncu.range.start.line == 1 and ncu.range.end.character == 5

    doc.doc.apply_change((0, 4, 0, 5), "3")
    doc.doc.version = 2
    await server.publish(URI)
    codes = [str(d.code) for d in rec.published[-1].diagnostics]
    assert codes == ["stitch.verify"]  # the profile described version 1; unversioned ones stay
    server.clear_diagnostics(URI, "verify")
    await asyncio.sleep(0.05)
    assert rec.published[-1].diagnostics == []


async def test_a_failing_source_is_logged_once_and_the_others_still_publish(
    server: StitchServer,
) -> None:
    rec = Recorder(server)

    def broken(doc: OpenDocument) -> list[Finding]:
        raise ValueError("boom")

    server.register_diagnostic_source("broken", broken)
    server.register_diagnostic_source("ok", lambda d: [_finding(1, "ok.one", "ok")])
    _open(server, "x = 1\n")
    for _ in range(3):
        await server.publish(URI)
    assert [str(d.code) for d in rec.published[-1].diagnostics] == ["ok.one"]
    assert len([m for m in rec.logs if "boom" in m]) == 1


async def test_debounced_publish_uses_the_latest_text(server: StitchServer) -> None:
    rec = Recorder(server)
    server.settings = server.settings.model_copy(update={"debounce_ms": 50})
    doc = _open(server, "x = 1\n")
    for v in range(2, 6):
        doc.doc.apply_change((0, 4, 0, 5), str(v))
        doc.doc.version = v
        server.schedule_publish(URI)
    await asyncio.sleep(0.2)
    assert [p.version for p in rec.published] == [5]


def test_invalid_settings_are_dropped_one_by_one(server: StitchServer) -> None:
    report = server.apply_settings({"debounceMs": -1, "trials": 9, "maxFileBytes": "huge"})
    assert sorted(report.rejected) == ["debounceMs", "maxFileBytes"]
    assert server.settings.trials == 9
    assert server.settings.debounce_ms == 250


def test_commands_must_be_registered_before_initialize(server: StitchServer) -> None:
    async def handler(ls: Any) -> None:
        return None

    server.register_command("stitch.verify", handler)
    assert not server.command_enabled("stitch.verify")  # untrusted until initialize says
    server.set_initialization_options({"trusted": True})
    assert server.command_enabled("stitch.verify")
    server.trusted = False
    assert not server.command_enabled("stitch.verify")
    server.register_command("stitch.info", handler, executes_code=False)
    assert server.command_enabled("stitch.info")
    server.initialized = True
    with pytest.raises(RuntimeError, match="after initialize"):
        server.register_command("stitch.late", handler)


def test_a_feature_module_that_fails_to_load_is_reported_not_fatal() -> None:
    server = create_server(
        devices=[], feature_modules=["stitch_lsp.server.features.static", "no.such.module"]
    )
    assert "stitch" in server.diagnostic_sources
    assert len(server.load_errors) == 1 and "no.such.module" in server.load_errors[0]
