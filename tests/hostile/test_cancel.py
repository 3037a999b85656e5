"""Cancel means cancel, from every path the editor has: `$/cancelRequest` on the
`stitch.generate` request, the Cancel button of its progress, and an edit to the document.

Each time: the request ends at once, the endpoint gets no further call, the progress ends, and
no file is written. The Coder is a loopback endpoint whose first reply never comes.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from tests.agents.fake_openai import Fail, FakeOpenAI
from tests.server.lsp_client import (
    SERVER_NO_GPU,
    StitchClient,
    edit,
    initialize,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

DATA = Path(__file__).resolve().parents[1] / "agents" / "data"
REQUEST_CANCELLED = -32800


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


def _job_token(client: StitchClient) -> str | None:
    for token, reports in client.progress_reports.items():
        if str(token).startswith("stitch-job-") and any(
            isinstance(r, lsp.WorkDoneProgressBegin) for r in reports
        ):
            return str(token)
    return None


def _ended(client: StitchClient, token: str) -> bool:
    return any(isinstance(r, lsp.WorkDoneProgressEnd) for r in client.progress_reports[token])


@pytest.mark.slow
@pytest.mark.parametrize("path", ["cancelRequest", "progress", "didChange"])
async def test_cancel_stops_generation(client: StitchClient, tmp_path: Path, path: str) -> None:
    pytest.importorskip("torch")  # the Planner's worker
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([Fail(hang_s=60.0)] * 3)
        settings = {"llmTimeoutS": 120, "maxAttempts": 3}
        user = {"llmBaseUrl": endpoint.base_url}  # where code goes: a user-level setting only
        await initialize(client, tmp_path, settings=settings, user_settings=user, trusted=True)
        uri = await open_file(client, ref)
        await wait_for_diagnostics(client, uri)
        params = lsp.ExecuteCommandParams(command="stitch.generate", arguments=[uri])
        run = asyncio.ensure_future(
            client.protocol.send_request_async(
                lsp.WORKSPACE_EXECUTE_COMMAND, params, msg_id="generate-1"
            )
        )
        await wait_until(lambda: len(endpoint.script.prompts("coder")) == 1, 90)
        token = _job_token(client)
        assert token is not None
        started = time.monotonic()
        if path == "cancelRequest":
            client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="generate-1"))
        elif path == "progress":
            client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
        else:
            edit(client, uri, 2, (0, 0), (0, 0), "# an edit\n")

        if path == "cancelRequest":
            with pytest.raises(JsonRpcException) as err:
                await asyncio.wait_for(run, 15)
            assert err.value.code == REQUEST_CANCELLED
        else:
            result = await asyncio.wait_for(run, 15)
            assert result["ok"] is False and result["state"] == "cancelled"
        assert time.monotonic() - started < 10
        await wait_until(lambda: _ended(client, token), 15)
        calls = len(endpoint.script.requests)
        await asyncio.sleep(2.0)  # a loop that ran on would ask the endpoint again by now
        assert len(endpoint.script.requests) == calls
        assert len(endpoint.script.prompts("coder")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale_relu.py"]
