"""The editor side: code lens and code action on a Model, the command producing a new file.

Runs the real server (pytest-lsp) with GPUs hidden, so the loop verifies compile-only with nvcc;
the Coder is a scripted loopback endpoint.
"""

from __future__ import annotations

import ast
import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from stitch_lsp.runtime.fastcuda import find_nvcc
from tests.agents.fake_openai import Fail, FakeOpenAI
from tests.server.lsp_client import (
    SERVER_NO_GPU,
    StitchClient,
    debug_info,
    initialize,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parent / "data"


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


def _ident(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=uri)


def _command_of(action: lsp.CodeAction | lsp.Command) -> tuple[str, list]:
    """pytest-lsp's client decodes a CodeAction carrying a command as a Command whose `command`
    is the nested object's repr; the wire JSON is a CodeAction. Accept both shapes."""
    if isinstance(action, lsp.CodeAction):
        assert action.command is not None
        return action.command.command, list(action.command.arguments or [])
    if action.command.startswith("{"):
        inner = ast.literal_eval(action.command)
        return inner["command"], list(inner.get("arguments") or [])
    return action.command, list(action.arguments or [])


def _at(line: int, char: int = 0) -> lsp.Range:
    pos = lsp.Position(line=line, character=char)
    return lsp.Range(start=pos, end=pos)


@pytest.mark.skipif(
    find_nvcc() is None, reason="nvcc not found: compile-only verification needs it"
)
async def test_code_action_generates_a_new_file(client: StitchClient, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    (tmp_path / "scale_relu_stitch.py").write_text("# not ours\n")
    good = (DATA / "scale_relu_candidate.py").read_text()
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.append(f"```python\n{good}```\n")
        settings = {
            "llmModel": "scripted",
            "maxAttempts": 2,
            "trajectoriesDir": str(tmp_path / "traj"),
        }
        user = {"llmBaseUrl": endpoint.base_url}
        await initialize(client, tmp_path, settings=settings, user_settings=user, trusted=True)
        client.apply_edits_to_disk = True
        uri = await open_file(client, ref)
        await wait_for_diagnostics(client, uri)

        lenses = await client.text_document_code_lens_async(
            lsp.CodeLensParams(text_document=_ident(uri))
        )
        generate = [x for x in lenses if x.command and x.command.command == "stitch.generate"]
        assert [x.command.title for x in generate] == ["Generate fused CUDA implementation"]
        model_line = next(
            i for i, t in enumerate(ref.read_text().splitlines()) if t.startswith("class Model")
        )
        assert generate[0].range.start.line == model_line

        actions = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=_ident(uri),
                range=_at(model_line + 5, 8),
                context=lsp.CodeActionContext(diagnostics=[]),
            )
        )
        ours = [a for a in actions if a.title == "Generate fused CUDA implementation"]
        assert len(ours) == 1, [a.title for a in actions]
        command, arguments = _command_of(ours[0])
        assert command == "stitch.generate" and arguments == [uri]

        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=arguments)
        )

    assert result["ok"], result
    out = tmp_path / "scale_relu_stitch_2.py"
    assert result["output"] == out.as_uri()
    assert (tmp_path / "scale_relu_stitch.py").read_text() == "# not ours\n"
    text = out.read_text()
    assert text.splitlines()[0] == "# stitch-lsp: reference=scale_relu.py"
    assert text.split("\n", 1)[1] == good
    # the edit creates the file without overwriting, then inserts the text
    create = client.applied_edits[-1].edit.document_changes[0]
    assert isinstance(create, lsp.CreateFile)
    assert create.options.overwrite is False and create.options.ignore_if_exists is False
    assert [d.uri for d in client.shown_documents] == [out.as_uri()]
    # the message says plainly what was not verified
    assert any("NOT verified" in m.message for m in client.messages)
    # progress named the stages
    reports = [getattr(r, "message", None) for rs in client.progress_reports.values() for r in rs]
    assert "Planning" in reports and "Coding attempt 1/2" in reports and "Verifying" in reports
    # the summary shows as a lens on the reference
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=_ident(uri))
    )
    titles = [x.command.title for x in lenses if x.command]
    assert any(
        t.startswith("stitch: compiled, NOT verified") and "scale_relu_stitch_2.py" in t
        for t in titles
    )
    assert list((tmp_path / "traj").glob("*.jsonl"))
    assert getattr(client, "lens_refreshes", 0) == 1
    assert (await debug_info(client))["torchImported"] is False  # the loop ran in workers


async def test_optimize_needs_a_gpu_and_lens_shows_on_modelnew(
    client: StitchClient, tmp_path: Path
) -> None:
    shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py")
    cand = tmp_path / "cand.py"
    cand.write_text(
        "# stitch-lsp: reference=scale_relu.py\n" + (DATA / "scale_relu_candidate.py").read_text()
    )
    await initialize(client, tmp_path, trusted=True)
    uri = await open_file(client, cand)
    await wait_for_diagnostics(client, uri)
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=_ident(uri))
    )
    assert "Optimize with profiler feedback" in [x.command.title for x in lenses if x.command]
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="stitch.optimize", arguments=[uri])
    )
    assert not result["ok"] and "needs a CUDA GPU" in result["message"]


async def test_cancelling_the_progress_stops_the_run(client: StitchClient, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.append(Fail(hang_s=20.0))
        settings = {"llmTimeoutS": 60, "maxAttempts": 2}
        user = {"llmBaseUrl": endpoint.base_url}
        await initialize(client, tmp_path, settings=settings, user_settings=user, trusted=True)
        uri = await open_file(client, ref)
        await wait_for_diagnostics(client, uri)
        run = asyncio.ensure_future(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="stitch.generate", arguments=[uri])
            )
        )

        def coding() -> str | None:
            for token, reports in client.progress_reports.items():
                if any(getattr(r, "message", None) == "Coding attempt 1/2" for r in reports):
                    return token
            return None

        await wait_until(lambda: coding() is not None, 60)
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=coding()))
        result = await asyncio.wait_for(run, 15)
    assert result["ok"] is False and result["state"] == "cancelled"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale_relu.py"]


async def test_a_reference_name_no_header_can_carry_is_refused_before_the_run(
    client: StitchClient, tmp_path: Path
) -> None:
    """A newline in the file's name would end the generated file's header line: refused up
    front, and nothing is written."""
    ref = tmp_path / "bad\nname.py"
    shutil.copy(DATA / "scale_relu.py", ref)
    await initialize(client, tmp_path)
    uri = await open_file(client, ref)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="stitch.generate", arguments=[uri])
    )
    assert not result["ok"]
    assert "control character" in result["message"] and "nothing was generated" in result["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
