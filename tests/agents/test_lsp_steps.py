"""A step-by-step run from the editor: the real server (GPUs hidden, so compile-only with nvcc),
the real Planner and builtin generator, a scripted Coder on 127.0.0.1. Progress names each
subtask and the command's result says which subtask each attempt belongs to."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from stitch_lsp.runtime.fastcuda import find_nvcc
from tests.agents.fake_openai import FakeOpenAI
from tests.server.lsp_client import (
    SERVER_NO_GPU,
    StitchClient,
    initialize,
    open_file,
    wait_for_diagnostics,
)

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(DATA))
import conv3_steps  # noqa: E402


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif(
    find_nvcc() is None, reason="nvcc not found: compile-only verification needs it"
)
async def test_generate_shows_each_subtask(client: StitchClient, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ref = Path(shutil.copy(DATA / "conv3_scan.py", tmp_path / "conv3_scan.py"))
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.append(conv3_steps.write_scan_group)
        settings = {"llmModel": "scripted", "trajectoriesDir": str(tmp_path / "traj")}
        user = {"llmBaseUrl": endpoint.base_url}
        await initialize(client, tmp_path, settings=settings, user_settings=user, trusted=True)
        client.apply_edits_to_disk = True
        uri = await open_file(client, ref)
        await wait_for_diagnostics(client, uri)
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="stitch.generate", arguments=[uri])
        )
    assert result["ok"], result
    reports = [getattr(r, "message", None) for rs in client.progress_reports.values() for r in rs]
    assert "Subtask 1/3: conv+relu, attempt 1/3" in reports
    assert "Subtask 2/3: conv+logcumsumexp, attempt 1/3" in reports
    assert "Seeding the subtasks with the builtin generator" in reports
    assert [(a["subtask"], a["phase"], a["status"]) for a in result["attempts"]] == [
        ("1/3 conv+relu", "subtask", "compiled"),
        ("2/3 conv+logcumsumexp", "subtask", "compiled"),
        ("3/3 conv+sigmoid", "subtask", "compiled"),
    ]
    text = (tmp_path / "conv3_scan_stitch.py").read_text()
    assert "logcumsumexp = _row_logcumsumexp(conv2)" in text and "_stitch_k3_group(self)" in text
    # the toast is the verdict alone; the whole sentence, subtasks and all, goes to the log
    assert any("3 subtasks" in m.message for m in client.log_messages)
