"""End-to-end tests of the plug-in registry, through `tests/server/fake_feature.py`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.server.lsp_client import (
    StitchClient,
    codes,
    debug_info,
    initialize,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)


def _ident(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=uri)


def _whole(line: int = 0) -> lsp.Range:
    return lsp.Range(
        start=lsp.Position(line=line, character=0), end=lsp.Position(line=line, character=0)
    )


async def test_trusted_session_advertises_every_registered_command(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    result = await initialize(fake_client, tmp_path, trusted=True)
    commands = set(result.capabilities.execute_command_provider.commands)
    assert {"test.run", "test.info", "test.job"} <= commands
    assert result.capabilities.code_lens_provider is not None
    assert result.capabilities.code_action_provider is not None
    # test.run prints to stdout and starts a child that does too: the LSP stream survives.
    out = await fake_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="test.run", arguments=[1, "two"])
    )
    assert out["ran"] == [1, "two"]
    assert (await debug_info(fake_client))["torchImported"] is False


async def test_untrusted_session_runs_nothing(fake_client: StitchClient, tmp_path: Path) -> None:
    result = await initialize(fake_client, tmp_path, trusted=False)
    commands = set(result.capabilities.execute_command_provider.commands)
    assert "test.info" in commands  # runs no code: still there
    assert not commands & {"test.run", "test.job"}
    uri = await open_file(fake_client, tmp_path / "a.py", "x = 1\n")
    await wait_for_diagnostics(fake_client, uri)
    lenses = await fake_client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=_ident(uri))
    )
    assert [lens.command.command for lens in lenses] == ["test.info"]
    actions = await fake_client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=_ident(uri),
            range=_whole(),
            context=lsp.CodeActionContext(diagnostics=[]),
        )
    )
    assert [a.title for a in actions] == ["Show info"]
    try:
        await fake_client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="test.run", arguments=[])
        )
        raise AssertionError("an untrusted workspace ran a command")
    except Exception as exc:
        assert "not defined" in str(exc)
    assert any("untrusted" in m.message for m in fake_client.log_messages)


async def test_sources_merge_and_a_broken_provider_is_logged_once(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    await initialize(fake_client, tmp_path)
    text = (Path(__file__).parent / "data" / "cheat.py").read_text() + "# FAKE\n"
    uri = await open_file(fake_client, tmp_path / "cheat.py", text)
    diags = await wait_for_diagnostics(fake_client, uri)
    assert {"stitch.torch-op", "fake.marker"} <= set(codes(diags))
    fake = next(d for d in diags if d.code == "fake.marker")
    assert fake.source == "fake"
    assert fake.code_description.href == "https://example.org/fake"
    assert fake.range.start.line == text.count("\n") - 1
    for _ in range(3):
        hover = await fake_client.text_document_hover_async(
            lsp.HoverParams(text_document=_ident(uri), position=lsp.Position(line=12, character=8))
        )
        assert hover is not None
        assert "class `ModelNew`" in hover.contents.value  # static section first
        assert hover.contents.value.endswith("**fake section**")  # the broken one skipped
    errors = [m for m in fake_client.log_messages if "broken on purpose" in m.message]
    assert len(errors) == 1


async def test_job_progress_status_and_cancel_from_the_client(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    await initialize(fake_client, tmp_path)
    uri = await open_file(fake_client, tmp_path / "a.py", "x = 1\n")
    await wait_for_diagnostics(fake_client, uri)

    # A CPU job runs to the end with begin/report/end progress and a `done` status.
    out = await fake_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="test.job", arguments=[uri, 0.1, False])
    )
    assert out["state"] == "done"
    token = f"stitch-job-{out['job']}"
    kinds = [type(v).__name__ for v in fake_client.progress_reports[token]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert "WorkDoneProgressReport" in kinds
    assert fake_client.progress_reports[token][0].cancellable is True
    done = [s for s in fake_client.statuses if s["state"] == "done"]
    assert done[-1] == {"state": "done", "message": "fake job exited 0", "speedup": 2.5}

    # The user presses cancel on the progress notification: the worker dies, the job ends.
    pending = asyncio.ensure_future(
        fake_client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="test.job", arguments=[uri, 30, False])
        )
    )
    await wait_until(lambda: len(fake_client.progress_reports) == 2, 10)
    token = next(t for t in fake_client.progress_reports if t != f"stitch-job-{out['job']}")
    await wait_until(lambda: len(fake_client.progress_reports[token]) >= 1, 10)
    fake_client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    cancelled = await asyncio.wait_for(pending, 10)
    assert cancelled["state"] == "cancelled"

    # A GPU job on a machine without a GPU fails at once, and says so.
    info = await debug_info(fake_client)
    if not info["devices"]:
        out = await asyncio.wait_for(
            fake_client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="test.job", arguments=[uri, 0.1, True])
            ),
            5,
        )
        assert out["state"] == "no_gpu" and "GPU" in out["message"]
        assert fake_client.statuses[-1]["state"] == "error"


async def test_editing_the_document_cancels_its_running_job(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    await initialize(fake_client, tmp_path)
    uri = await open_file(fake_client, tmp_path / "a.py", "x = 1\n")
    await wait_for_diagnostics(fake_client, uri)
    pending = asyncio.ensure_future(
        fake_client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="test.job", arguments=[uri, 30, False])
        )
    )
    await wait_until(lambda: len(fake_client.progress_reports) == 1, 10)
    fake_client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text="x = 2\n")],
        )
    )
    out = await asyncio.wait_for(pending, 10)
    assert out["state"] == "cancelled" and "changed" in out["message"]


async def test_no_worker_outlives_an_editor_that_vanishes(tmp_path: Path) -> None:
    """The editor dies without `shutdown`: stdin closes, the server exits, and so does every
    process its workers started (the whole process group, not just the direct child)."""
    import os

    from tests.server.lsp_client import SERVER_WITH_FAKES

    client = await SERVER_WITH_FAKES.start()
    try:
        await initialize(client, tmp_path)
        uri = await open_file(client, tmp_path / "a.py", "x = 1\n")
        pidfile = tmp_path / "worker.pid"
        running = asyncio.ensure_future(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(
                    command="test.job", arguments=[uri, 60, False, str(pidfile)]
                )
            )
        )
        await wait_until(lambda: pidfile.exists() and pidfile.read_text() != "", 15)
        pid = int(pidfile.read_text())
        server = client._server
        assert server is not None and server.stdin is not None
        server.stdin.close()  # the editor is gone
        await asyncio.wait_for(server.wait(), 15)

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] == "Z"

        await wait_until(gone, 10)
        running.cancel()
    finally:
        await client.stop()
